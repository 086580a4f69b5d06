#include "model/registry.h"

#include "core/error.h"
#include "model/arch/archs.h"

namespace tandem {
namespace {

struct ArchEntry {
  const char* model_type;
  ArchBuilder build;
};

const ArchEntry kArchitectures[] = {
    {"llama", arch::build_llama},
    {"qwen2", arch::build_qwen2},
    {"qwen3", arch::build_qwen3},
    {"mistral", arch::build_mistral},
    {"phi3", arch::build_phi3},
    {"gemma2", arch::build_gemma2},
    {"gemma3_text", arch::build_gemma3},
    {"qwen3_moe", arch::build_qwen3_moe},
    {"mixtral", arch::build_mixtral},
    {"gemma4_text", arch::build_gemma4},
    {"gemma3n_text", arch::build_gemma3n},
    {"minicpm", arch::build_minicpm},
    // Multimodal folders (text_config + vision_config; arch/gemma_multimodal.cpp).
    {"gemma3", arch::build_gemma3_multimodal},
    {"gemma3n", arch::build_gemma3n_multimodal},
    {"gemma4", arch::build_gemma4_multimodal},
};

}  // namespace

ArchBuilder find_architecture(const std::string& model_type) {
  for (auto& a : kArchitectures)
    if (model_type == a.model_type) return a.build;
  return nullptr;
}

std::vector<std::string> architecture_names() {
  std::vector<std::string> names;
  for (auto& a : kArchitectures) names.push_back(a.model_type);
  return names;
}

QuantScheme model_quant_scheme(const ModelConfig& config, const std::optional<QuantScheme>& online) {
  return resolve_quantization(parse_quantization_config(config.raw, "config.json"), online);
}

std::string weight_format_name(const ModelConfig& config, const std::optional<QuantScheme>& online) {
  const std::string torch = config.raw.value("torch_dtype", std::string("bfloat16"));
  const std::string stored = torch == "float16" ? "f16" : torch == "float32" ? "f32" : "bf16";
  return model_quant_scheme(config, online).describe(stored);
}

std::unique_ptr<Model> load_model(const std::filesystem::path& dir, Backend& backend,
                                  const LoadOptions& options) {
  ModelConfig config = ModelConfig::load(dir);
  config.lora = options.lora;
  // A multimodal folder's builder is its top-level type's: it loads the text model and
  // the towers.
  const std::string& type =
      config.multimodal_type.empty() ? config.model_type : config.multimodal_type;
  ArchBuilder build = find_architecture(type);
  if (!build) {
    std::string known;
    for (auto& n : architecture_names()) known += (known.empty() ? "" : ", ") + n;
    fail("{}: unknown model_type '{}' (supported: {})", (dir / "config.json").string(), type,
         known);
  }
  Checkpoint checkpoint = Checkpoint::open(dir);
  checkpoint.set_quant(model_quant_scheme(config, options.online));
  return build(std::move(config), checkpoint, backend);
}

}  // namespace tandem
