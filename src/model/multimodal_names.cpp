#include "model/multimodal_names.h"

#include "core/error.h"

namespace tandem {

std::optional<std::string> find_prefix(const Checkpoint& ck,
                                       const std::vector<std::string>& prefixes,
                                       const std::string& probe) {
  for (const std::string& p : prefixes)
    if (ck.has(p + probe)) return p;
  return std::nullopt;
}

std::string require_prefix(const Checkpoint& ck, const std::vector<std::string>& prefixes,
                           const std::string& probe, const std::string& part) {
  if (auto p = find_prefix(ck, prefixes, probe)) return *p;
  std::string tried;
  for (const std::string& p : prefixes) tried += (tried.empty() ? "'" : ", '") + p + probe + "'";
  fail("{}: the {} is missing: no tensor {}", ck.dir().string(), part, tried);
}

std::string text_model_prefix(const Checkpoint& ck) {
  return find_prefix(ck, {"model.language_model.", "language_model.model.", "model."},
                     "embed_tokens.weight")
      .value_or("model.");
}

WeightMap rebase_text_map(WeightMap map, const std::string& prefix, const Checkpoint& ck) {
  const bool hub_head = ck.has("language_model.lm_head.weight");
  auto rebase = [&](std::string& s) {
    if (s.rfind("model.", 0) == 0)
      s = prefix + s.substr(6);
    else if (hub_head && s.rfind("lm_head.", 0) == 0)
      s = "language_model." + s;
  };
  for (WeightRule& rule : map)
    for (std::string& s : rule.sources) rebase(s);
  return map;
}

}  // namespace tandem
