// Client-facing failures. Anything a request can get wrong becomes an ApiError deep in
// parsing or validation; the route wrapper in http_server.cpp catches it and answers in
// the API's own error shape with the error's status. Nothing else in server/ decides a
// status code for a bad request.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include "core/error.h"
#include "server/common/json_text.h"

namespace tandem::server {

// Which error shape a route answers in.
enum class ApiStyle : uint8_t {
  OpenAI,     // {"error": {"message", "type", "param", "code"}}
  Anthropic,  // {"type": "error", "error": {"type", "message"}}
};

class ApiError : public Error {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = {},
           std::string code = {})
      : Error(std::move(message)),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }    // OpenAI's error type
  const std::string& param() const { return param_; }  // offending field, "" if none
  const std::string& code() const { return code_; }    // OpenAI's error code, "" if none

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// 400 naming the offending field: invalid_request("top_p", "must be in (0, 1], got {}", v).
template <typename... Args>
[[noreturn]] void invalid_request(std::string param, fmt::format_string<Args...> format,
                                  Args&&... args) {
  throw ApiError(400, "invalid_request_error", fmt::format(format, std::forward<Args>(args)...),
                 std::move(param));
}

ApiError unauthorized_error();
ApiError not_found_error(std::string message);
ApiError payload_too_large_error(size_t limit_bytes);
ApiError not_ready_error();      // 503 while the model loads
ApiError shutting_down_error();  // 503 while the server drains
ApiError internal_error(std::string message);

// The error body in the given API's shape.
Json error_body(ApiStyle style, const ApiError& error);

// Anthropic's error type for an HTTP status ("invalid_request_error", "not_found_error"...).
const char* anthropic_error_type(int status);

}  // namespace tandem::server
