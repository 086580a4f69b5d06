// A PEFT LoRA adapter folder as PEFT writes it: adapter_config.json +
// adapter_model.safetensors, read into host f32 matrices per module, each with the scaling
// PEFT gives it. The definition (../shared/oracle/lora/README.md): a targeted projection
// computes y = W x + scaling · B (A x), scaling = alpha / r (alpha / √r with use_rslora),
// r and alpha per module from rank_pattern / alpha_pattern when a pattern matches.
// Everything the file may hold that changes that function and tandem does not compute
// (DoRA, biases, modules_to_save, ...) is refused with an error naming the option; nothing
// is silently ignored.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tensor.h"

namespace tandem {

// adapter_config.json, the parts that define the function.
struct PeftConfig {
  int r = 8;
  double lora_alpha = 8;
  bool use_rslora = false;
  // A list of names matched against a module name's tail, or one regex for the whole
  // name (PEFT's check_target_module_exists); "all-linear" matches every projection.
  std::vector<std::string> target_list;
  std::optional<std::string> target_regex;
  std::vector<std::string> exclude_list;
  std::optional<std::string> exclude_regex;
  std::map<std::string, int> rank_pattern;      // module pattern → r
  std::map<std::string, double> alpha_pattern;  // module pattern → alpha

  // Throws tandem::Error naming `where` and the unsupported or malformed field.
  static PeftConfig parse(const nlohmann::json& j, const std::string& where);
  // Whether PEFT would have put an adapter on module `name` ("model.layers.0.self_attn.q_proj").
  bool targets(const std::string& name) const;
  // r, alpha and the scaling PEFT gives module `name`.
  int rank_of(const std::string& name) const;
  float scaling_of(const std::string& name) const;
};

struct PeftModule {
  Tensor a;  // host f32 [r, K]
  Tensor b;  // host f32 [N, r]
  float scaling = 1.f;
};

struct PeftAdapter {
  std::filesystem::path dir;
  PeftConfig config;
  std::map<std::string, PeftModule> modules;  // by module name, "base_model.model." removed

  int max_rank() const;
};

// Reads and checks `dir` (config options, tensor names, each A/B pair's shapes against its
// module's rank); throws tandem::Error naming the folder and the cause. Whether the modules
// exist in a model, with those shapes, is checked when the adapter is written into it
// (lora_slots.h).
PeftAdapter load_peft_adapter(const std::filesystem::path& dir);

}  // namespace tandem
