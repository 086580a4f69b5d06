#include "server/common/pooling_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "server/common/json_text.h"

namespace tandem::server {
namespace {

Json read_json_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) fail("{}: cannot be read", file.string());
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: not valid JSON", file.string());
  return j;
}

// The Pooling module's folder from modules.json (empty when the file is absent), after
// checking that nothing but Normalize follows it.
std::optional<std::filesystem::path> pooling_folder(const std::filesystem::path& dir) {
  const std::filesystem::path modules = dir / "modules.json";
  if (!std::filesystem::exists(modules)) {
    if (std::filesystem::exists(dir / "1_Pooling" / "config.json")) return dir / "1_Pooling";
    return std::nullopt;
  }
  const Json list = read_json_file(modules);
  if (!list.is_array()) fail("{}: expected a list of modules", modules.string());
  std::optional<std::filesystem::path> folder;
  for (const Json& m : list) {
    const std::string type = m.is_object() ? m.value("type", "") : "";
    const std::string path = m.is_object() ? m.value("path", "") : "";
    if (type.ends_with(".Pooling")) {
      folder = dir / path;
    } else if (folder && !type.ends_with(".Normalize")) {
      fail(
          "{}: module '{}' ({}) follows the pooling; tandem serves the pooled (and normalized) "
          "hidden state only",
          modules.string(), path, type);
    }
  }
  return folder;
}

}  // namespace

std::optional<Pooling> sentence_transformers_pooling(const std::filesystem::path& dir) {
  const std::optional<std::filesystem::path> folder = pooling_folder(dir);
  if (!folder) return std::nullopt;
  const std::filesystem::path file = *folder / "config.json";
  const Json c = read_json_file(file);
  if (!c.is_object()) fail("{}: expected an object", file.string());
  std::optional<Pooling> chosen;
  for (auto it = c.begin(); it != c.end(); ++it) {
    if (!it.key().starts_with("pooling_mode_") || !it.value().is_boolean() ||
        !it.value().get<bool>())
      continue;
    const std::string mode = it.key().substr(13);
    const std::optional<Pooling> p = mode == "lasttoken"     ? std::optional(Pooling::Last)
                                     : mode == "mean_tokens" ? std::optional(Pooling::Mean)
                                     : mode == "cls_token"   ? std::optional(Pooling::Cls)
                                                             : std::nullopt;
    if (!p)
      fail("{}: pooling mode '{}' is not one tandem computes (last, mean, cls)", file.string(),
           it.key());
    if (chosen) fail("{}: several pooling modes at once are not supported", file.string());
    chosen = p;
  }
  if (!chosen) fail("{}: no pooling_mode_* is set", file.string());
  if (c.contains("include_prompt") && c["include_prompt"] == false)
    fail("{}: include_prompt false (pooling that skips the instruction) is not supported",
         file.string());
  return chosen;
}

PoolingChoice choose_pooling(const std::filesystem::path& dir, const std::string& flag) {
  const std::optional<Pooling> folder = sentence_transformers_pooling(dir);
  if (flag != "auto") {
    const std::optional<Pooling> p = pooling_from_name(flag);
    if (!p) fail("--pooling '{}': expected auto, last, mean or cls", flag);
    return {*p, "--pooling"};
  }
  if (folder) return {*folder, "sentence-transformers config"};
  return {Pooling::Last, "default"};
}

}  // namespace tandem::server
