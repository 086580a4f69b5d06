#include "eval/http_error.h"

#include <nlohmann/json.hpp>

namespace tandem::eval {

std::string http_error_text(int status, const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  std::string message = body.substr(0, 300);
  if (j.is_object() && j.contains("error")) {
    const nlohmann::json& e = j["error"];
    message = e.is_object() && e.contains("message") && e["message"].is_string()
                  ? e["message"].get<std::string>()
                  : e.dump();
  }
  return "HTTP " + std::to_string(status) + ": " + message;
}

}  // namespace tandem::eval
