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

std::unique_ptr<Model> load_model(const std::filesystem::path& dir, Backend& backend,
                                  LoraCapacity lora) {
  ModelConfig config = ModelConfig::load(dir);
  config.lora = lora;
  ArchBuilder build = find_architecture(config.model_type);
  if (!build) {
    std::string known;
    for (auto& n : architecture_names()) known += (known.empty() ? "" : ", ") + n;
    fail("{}: unknown model_type '{}' (supported: {})", (dir / "config.json").string(),
         config.model_type, known);
  }
  Checkpoint checkpoint = Checkpoint::open(dir);
  return build(std::move(config), checkpoint, backend);
}

}  // namespace tandem
