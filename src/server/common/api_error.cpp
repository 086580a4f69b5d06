#include "server/common/api_error.h"

#include <nlohmann/json.hpp>

namespace tandem::server {

ApiError unauthorized_error() {
  return ApiError(401, "invalid_request_error", "Incorrect or missing API key.", "",
                  "invalid_api_key");
}

ApiError not_found_error(std::string message) {
  return ApiError(404, "invalid_request_error", std::move(message), "", "not_found");
}

ApiError payload_too_large_error(size_t limit_bytes) {
  return ApiError(413, "invalid_request_error",
                  fmt::format("Request body is larger than the limit of {} bytes.", limit_bytes),
                  "", "request_too_large");
}

ApiError not_ready_error() {
  return ApiError(503, "server_error", "The model is still loading; try again shortly.", "",
                  "model_loading");
}

ApiError shutting_down_error() {
  return ApiError(503, "server_error", "The server is shutting down.", "", "shutting_down");
}

ApiError internal_error(std::string message) {
  return ApiError(500, "server_error", std::move(message));
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}

Json error_body(ApiStyle style, const ApiError& error) {
  if (style == ApiStyle::Anthropic) {
    return {{"type", "error"},
            {"error", {{"type", anthropic_error_type(error.status())}, {"message", error.what()}}}};
  }
  Json param = error.param().empty() ? Json() : Json(error.param());
  Json code = error.code().empty() ? Json() : Json(error.code());
  return {{"error",
           {{"message", error.what()}, {"type", error.type()}, {"param", param}, {"code", code}}}};
}

}  // namespace tandem::server
