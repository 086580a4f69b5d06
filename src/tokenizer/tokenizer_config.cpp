#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

using nlohmann::json;

// "bos_token": "<s>", or {"__type": "AddedToken", "content": "<s>", ...}, or null.
std::optional<std::string> token_field(const json& j, const char* key, std::string_view origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail("{}: \"{}\" must be a string or an object with \"content\"", origin, key);
}

std::optional<bool> bool_field(const json& j, const char* key, std::string_view origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) fail("{}: \"{}\" must be a boolean", origin, key);
  return it->get<bool>();
}

std::optional<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

const json& TokenizerConfig::raw() const {
  static const json empty = json::object();
  return raw_json ? *raw_json : empty;
}

TokenizerConfig TokenizerConfig::parse(const json& j, std::string_view origin) {
  if (!j.is_object()) fail("{}: expected a JSON object", origin);
  TokenizerConfig c;
  c.raw_json = std::make_shared<const json>(j);
  c.bos_token = token_field(j, "bos_token", origin);
  c.eos_token = token_field(j, "eos_token", origin);
  c.pad_token = token_field(j, "pad_token", origin);
  c.unk_token = token_field(j, "unk_token", origin);
  c.add_bos_token = bool_field(j, "add_bos_token", origin);
  c.add_eos_token = bool_field(j, "add_eos_token", origin);
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return c;
  if (it->is_string()) {
    c.chat_template = it->get<std::string>();
  } else if (it->is_array()) {
    for (const json& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
          !entry["name"].is_string() || !entry["template"].is_string())
        fail("{}: chat_template entries must be {{\"name\": ..., \"template\": ...}}", origin);
      c.named_templates[entry["name"].get<std::string>()] = entry["template"].get<std::string>();
    }
    if (auto d = c.named_templates.find("default"); d != c.named_templates.end())
      c.chat_template = d->second;
  } else {
    fail("{}: chat_template must be a string or a list of {{name, template}}", origin);
  }
  return c;
}

TokenizerConfig TokenizerConfig::load(const std::filesystem::path& dir) {
  if (is_gguf_file(dir)) return tokenizer_config_from_gguf(GgufFile::open(dir)->metadata());
  std::filesystem::path file = dir / "tokenizer_config.json";
  TokenizerConfig c;
  if (auto text = read_text_file(file)) {
    json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) fail("{}: invalid JSON", file.string());
    c = parse(j, file.string());
  }
  if (!c.chat_template) {
    if (auto jinja = read_text_file(dir / "chat_template.jinja")) c.chat_template = *jinja;
  }
  return c;
}

}  // namespace tandem
