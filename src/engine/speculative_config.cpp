#include "engine/speculative_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <optional>

#include "core/error.h"

namespace tandem {

namespace {

using Json = nlohmann::json;

constexpr std::array<std::string_view, 6> kKeys = {"method",           "num_speculative_tokens",
                                                   "prompt_lookup_max", "prompt_lookup_min",
                                                   "model",            "adaptive"};
constexpr const char* kKnownKeys =
    "method, num_speculative_tokens, prompt_lookup_max, prompt_lookup_min, model, adaptive";

// An integer field, or nullopt when absent (JSON null counts as absent, as in vLLM).
std::optional<int> int_field(const Json& j, const char* key, int lo, int hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    fail("--speculative-config: \"{}\" must be an integer (got {})", key, it->dump());
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    fail("--speculative-config: \"{}\" must be in {}..{} (got {})", key, lo, hi, v);
  return int(v);
}

SpecMethod method_of(const Json& j) {
  auto it = j.find("method");
  if (it == j.end() || it->is_null()) {
    if (j.contains("model")) return SpecMethod::DraftModel;
    fail("--speculative-config: give \"method\": \"ngram\" or a draft \"model\" folder");
  }
  if (!it->is_string()) fail("--speculative-config: \"method\" must be a string (got {})", it->dump());
  const std::string m = it->get<std::string>();
  if (m == "ngram") return SpecMethod::Ngram;
  if (m == "draft_model") return SpecMethod::DraftModel;
  fail("--speculative-config: \"method\" '{}' is not one of ngram, draft_model", m);
}

void read_ngram(const Json& j, SpeculativeConfig& c) {
  const std::optional<int> hi = int_field(j, "prompt_lookup_max", 1, 64);
  const std::optional<int> lo = int_field(j, "prompt_lookup_min", 1, 64);
  // vLLM's defaults: both 5 when neither is given, else the one given for both.
  c.prompt_lookup_max = hi.value_or(lo.value_or(5));
  c.prompt_lookup_min = lo.value_or(hi.value_or(5));
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    fail("--speculative-config: \"prompt_lookup_min\" {} is larger than \"prompt_lookup_max\" {}",
         c.prompt_lookup_min, c.prompt_lookup_max);
  if (j.contains("model"))
    fail("--speculative-config: method ngram takes no \"model\" (a draft model is method draft_model)");
}

void read_draft(const Json& j, SpeculativeConfig& c) {
  auto it = j.find("model");
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
    fail("--speculative-config: method draft_model needs \"model\": the draft's folder");
  c.model = it->get<std::string>();
  for (const char* key : {"prompt_lookup_max", "prompt_lookup_min"})
    if (j.contains(key)) fail("--speculative-config: \"{}\" is an ngram setting, not a draft model's", key);
}

}  // namespace

const char* spec_method_name(SpecMethod method) {
  return method == SpecMethod::Ngram ? "ngram" : "draft_model";
}

std::string speculative_summary(const SpeculativeConfig& c) {
  std::string s = fmt::format("{}, K = {}", spec_method_name(c.method), c.num_speculative_tokens);
  if (c.method == SpecMethod::Ngram)
    s += fmt::format(", n-grams {}..{}", c.prompt_lookup_min, c.prompt_lookup_max);
  else
    s += fmt::format(", draft {}", c.model);
  return s + (c.adaptive ? ", adaptive" : ", fixed");
}

SpeculativeConfig parse_speculative_config(std::string_view json_text) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    fail("--speculative-config: not JSON ({})", e.what());
  }
  if (!j.is_object()) fail("--speculative-config: must be a JSON object (got {})", j.dump());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(kKeys.begin(), kKeys.end(), it.key()) == kKeys.end())
      fail("--speculative-config: unknown key \"{}\" (known: {})", it.key(), kKnownKeys);
  }
  SpeculativeConfig c;
  c.method = method_of(j);
  const std::optional<int> k = int_field(j, "num_speculative_tokens", 1, kMaxSpeculativeTokens);
  if (!k) fail("--speculative-config: \"num_speculative_tokens\" is required (1..{})", kMaxSpeculativeTokens);
  c.num_speculative_tokens = *k;
  if (c.method == SpecMethod::Ngram) read_ngram(j, c);
  else read_draft(j, c);
  if (auto it = j.find("adaptive"); it != j.end()) {
    if (!it->is_boolean()) fail("--speculative-config: \"adaptive\" must be true or false (got {})", it->dump());
    c.adaptive = it->get<bool>();
  }
  return c;
}

}  // namespace tandem
