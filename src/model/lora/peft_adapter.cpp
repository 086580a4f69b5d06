#include "model/lora/peft_adapter.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "loader/safetensors.h"

namespace tandem {

namespace {

using nlohmann::json;

bool is_set(const json& j, const char* key) {
  if (!j.contains(key)) return false;
  const json& v = j[key];
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_array() || v.is_object() || v.is_string()) return !v.empty();
  return true;
}

// Options that change the function or the tensors' meaning; set, each is refused.
void refuse_unsupported(const json& j, const std::string& where) {
  if (j.contains("peft_type") && j["peft_type"] != "LORA")
    fail("{}: peft_type {} is not supported (LORA only)", where, j["peft_type"].dump());
  if (j.contains("bias") && j["bias"] != "none")
    fail("{}: bias {} is not supported (\"none\" only)", where, j["bias"].dump());
  for (const char* key : {"use_dora", "modules_to_save", "lora_bias", "fan_in_fan_out",
                          "use_qalora", "alora_invocation_tokens", "trainable_token_indices",
                          "target_parameters", "layer_replication", "use_bdlora"})
    if (is_set(j, key)) fail("{}: '{}' is set ({}): not supported", where, key, j[key].dump());
}

// Names or one regex (PEFT's target_modules / exclude_modules).
void parse_names(const json& j, const char* key, std::vector<std::string>& list,
                 std::optional<std::string>& regex, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return;
  const json& v = j[key];
  if (v.is_string()) {
    regex = v.get<std::string>();
  } else if (v.is_array()) {
    for (auto& e : v) {
      if (!e.is_string()) fail("{}: '{}' holds a non-string {}", where, key, e.dump());
      list.push_back(e.get<std::string>());
    }
  } else {
    fail("{}: '{}' must be a list of names or a regex string, not {}", where, key, v.dump());
  }
}

bool name_matches(const std::string& name, const std::vector<std::string>& list,
                  const std::optional<std::string>& regex) {
  if (regex) return *regex == "all-linear" || std::regex_match(name, std::regex(*regex));
  for (auto& t : list)
    if (name == t || (name.size() > t.size() && name.ends_with("." + t))) return true;
  return false;
}

// PEFT's get_pattern_key: the first pattern equal to the name or matching "(.*\.)?(p)$".
template <typename V>
std::optional<V> pattern_value(const std::map<std::string, V>& patterns, const std::string& name) {
  for (auto& [pattern, value] : patterns)
    if (name == pattern || std::regex_match(name, std::regex("(.*\\.)?(" + pattern + ")")))
      return value;
  return std::nullopt;
}

}  // namespace

PeftConfig PeftConfig::parse(const json& j, const std::string& where) {
  if (!j.is_object()) fail("{}: not a JSON object", where);
  refuse_unsupported(j, where);
  PeftConfig c;
  try {
    c.r = j.value("r", 8);
    c.lora_alpha = j.value("lora_alpha", double(c.r));
    c.use_rslora = j.value("use_rslora", false);
    if (j.contains("rank_pattern") && j["rank_pattern"].is_object())
      for (auto& [k, v] : j["rank_pattern"].items()) c.rank_pattern[k] = v.get<int>();
    if (j.contains("alpha_pattern") && j["alpha_pattern"].is_object())
      for (auto& [k, v] : j["alpha_pattern"].items()) c.alpha_pattern[k] = v.get<double>();
  } catch (const json::exception& e) {
    fail("{}: {}", where, e.what());
  }
  if (c.r <= 0) fail("{}: r = {} must be positive", where, c.r);
  for (auto& [k, v] : c.rank_pattern)
    if (v <= 0) fail("{}: rank_pattern '{}' = {} must be positive", where, k, v);
  parse_names(j, "target_modules", c.target_list, c.target_regex, where);
  parse_names(j, "exclude_modules", c.exclude_list, c.exclude_regex, where);
  if (c.target_list.empty() && !c.target_regex) fail("{}: 'target_modules' is missing or empty", where);
  return c;
}

bool PeftConfig::targets(const std::string& name) const {
  if (name_matches(name, exclude_list, exclude_regex)) return false;
  return name_matches(name, target_list, target_regex);
}

int PeftConfig::rank_of(const std::string& name) const {
  return pattern_value(rank_pattern, name).value_or(r);
}

float PeftConfig::scaling_of(const std::string& name) const {
  double rank = rank_of(name), alpha = pattern_value(alpha_pattern, name).value_or(lora_alpha);
  return float(use_rslora ? alpha / std::sqrt(rank) : alpha / rank);
}

int PeftAdapter::max_rank() const {
  int m = 0;
  for (auto& [name, mod] : modules) m = std::max(m, int(mod.a.dim(0)));
  return m;
}

namespace {

Tensor to_host_f32(const Tensor& t) {
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  convert_to_f32(t.data, t.dtype, out.ptr<float>(), size_t(t.numel()));
  return out;
}

// "base_model.model.<module>.lora_A.weight" → <module>, 'A'; anything else is refused.
std::pair<std::string, char> split_tensor_name(const std::string& name, const std::string& where) {
  const std::string prefix = "base_model.model.";
  for (char which : {'A', 'B'}) {
    std::string suffix = std::string(".lora_") + which + ".weight";
    if (name.starts_with(prefix) && name.ends_with(suffix) && name.size() > prefix.size() + suffix.size())
      return {name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()), which};
  }
  fail("{}: tensor '{}' is not a LoRA A or B weight of a module (embedding adapters, DoRA "
       "magnitudes, biases and saved modules are not supported)", where, name);
}

void check_module(const std::string& name, const PeftModule& m, const PeftConfig& c,
                  const std::string& where) {
  if (!m.a.defined() || !m.b.defined())
    fail("{}: module '{}' has only its lora_{} weight", where, name, m.a.defined() ? 'A' : 'B');
  if (m.a.ndim() != 2 || m.b.ndim() != 2 || m.a.dim(0) != m.b.dim(1))
    fail("{}: module '{}': lora_A {} and lora_B {} are not [r, in] and [out, r]", where, name,
         m.a.shape.str(), m.b.shape.str());
  if (m.a.dim(0) != c.rank_of(name))
    fail("{}: module '{}' has rank {} but the config gives it r = {}", where, name, m.a.dim(0),
         c.rank_of(name));
  if (!c.targets(name))
    fail("{}: module '{}' has weights but is not in target_modules", where, name);
}

}  // namespace

PeftAdapter load_peft_adapter(const std::filesystem::path& dir) {
  PeftAdapter ad{.dir = dir};
  std::filesystem::path config_path = dir / "adapter_config.json";
  std::ifstream in(config_path);
  if (!in) fail("{}: cannot read (is {} a PEFT adapter folder?)", config_path.string(), dir.string());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: not valid JSON", config_path.string());
  ad.config = PeftConfig::parse(j, config_path.string());
  std::filesystem::path weights = dir / "adapter_model.safetensors";
  if (!std::filesystem::exists(weights))
    fail("{}: no adapter_model.safetensors (adapter_model.bin is not read)", dir.string());
  auto file = SafetensorsFile::open(weights);
  const std::string where = weights.string();
  for (const std::string& name : file->names()) {
    auto [module, which] = split_tensor_name(name, where);
    Tensor t = file->tensor(name);
    if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
      fail("{}: tensor '{}' is {} (f32, bf16 or f16 only)", where, name, dtype_name(t.dtype));
    (which == 'A' ? ad.modules[module].a : ad.modules[module].b) = to_host_f32(t);
  }
  if (ad.modules.empty()) fail("{}: holds no LoRA weights", where);
  for (auto& [name, m] : ad.modules) {
    check_module(name, m, ad.config, where);
    m.scaling = ad.config.scaling_of(name);
  }
  return ad;
}

}  // namespace tandem
