// Reading the vision configs' fields: absent or null means HF's default; a present field
// of the wrong type is an error naming it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/error.h"

namespace tandem {

template <typename T>
T config_field(const nlohmann::json& j, const char* key, T fallback, const std::string& src) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{}: field '{}' has the wrong type ({})", src, key, it->dump());
  }
}

// The first of two spellings present (Gemma 3's image_token_index / image_token_id).
template <typename T>
T config_field(const nlohmann::json& j, const char* key, const char* alias, T fallback,
               const std::string& src) {
  return config_field<T>(j, key, config_field<T>(j, alias, fallback, src), src);
}

// config.json's `vision_config`: the object, or an empty one when it is absent or not an
// object (every field then takes HF's default). Shared by the vision towers' parsers.
inline const nlohmann::json& vision_config_of(const nlohmann::json& config) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  auto it = config.find("vision_config");
  return it != config.end() && it->is_object() ? *it : kEmpty;
}

}  // namespace tandem
