// The JSON type the server speaks. Ordered, because key order is visible: templates render
// `tools | tojson` and clients read responses, both in the order the keys were written.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tandem::server {

using Json = nlohmann::ordered_json;

// Compact JSON text. Invalid UTF-8 (a token that is half a character) becomes U+FFFD
// instead of throwing: a response must never fail because of what the model produced.
inline std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Parsing goes through bounded_json.h: JSON from clients (and from the model) is bounded.

}  // namespace tandem::server
