// The JSON type the server speaks. Ordered, because key order is visible: templates render
// `tools | tojson` and clients read responses, both in the order the keys were written.
//
// Only the declaration: a file that builds, reads or copies a Json value includes
// <nlohmann/json.hpp> itself, so the many headers that merely pass one by reference do not
// pull the whole library into every file of the server.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tandem::server {

using Json = nlohmann::ordered_json;

// Compact JSON text. Invalid UTF-8 (a token that is half a character) becomes U+FFFD
// instead of throwing: a response must never fail because of what the model produced.
std::string dump_json(const Json& value);

// Parsing goes through bounded_json.h: JSON from clients (and from the model) is bounded.

}  // namespace tandem::server
