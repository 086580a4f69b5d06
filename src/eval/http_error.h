// What a failed answer from an OpenAI-compatible server said, for the clients of one
// (`tandem eval --url`, `tandem bench`).
#pragma once

#include <string>

namespace tandem::eval {

// "HTTP 400: <message>" from an OpenAI-style error body, else the body's first 300 bytes.
std::string http_error_text(int status, const std::string& body);

}  // namespace tandem::eval
