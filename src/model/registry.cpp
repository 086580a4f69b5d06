#include "model/registry.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/gguf_file.h"
#include "model/arch/archs.h"
#include "model/config.h"
#include "model/tp_slices.h"

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

// A config that declares more layers than the checkpoint holds is refused before the model
// allocates per-layer state for them (1,000,000 declared layers once took 17.5 s and 4 GB to
// be refused at the first missing tensor).
void check_declared_layers(const ModelConfig& config, const Checkpoint& checkpoint,
                           const std::string& source) {
  int64_t held = 0;
  for (const std::string& name : checkpoint.names()) {
    for (size_t pos = name.find("layers."); pos != std::string::npos; pos = name.find("layers.", pos + 1)) {
      if (pos > 0 && name[pos - 1] != '.') continue;
      int64_t n = 0;
      const char* begin = name.data() + pos + 7;
      auto [end, ec] = std::from_chars(begin, name.data() + name.size(), n);
      if (ec == std::errc() && end != begin && *end == '.') held = std::max(held, n + 1);
    }
  }
  if (config.num_layers > held)
    fail("{}: num_hidden_layers is {}, but the checkpoint holds tensors for {} layers", source,
         config.num_layers, held);
}

}  // namespace

void check_tensor_parallel(const ModelConfig& config, const std::string& type,
                           const std::string& source) {
  if (!config.tp.sharded()) return;
  // Multimodal gemma3 / gemma4: the text model split, the vision tower whole on every rank
  // (gemma3n's folder loads its text model only).
  static const char* const kSplit[] = {"llama",       "qwen2",   "qwen3",        "mistral",
                                       "phi3",        "gemma2",  "gemma3_text",  "gemma3",
                                       "gemma4_text", "gemma4",  "gemma3n_text", "gemma3n",
                                       "qwen3_moe",   "mixtral", "minicpm"};
  if (std::find(std::begin(kSplit), std::end(kSplit), type) == std::end(kSplit))
    fail(
        "{}: tensor parallelism does not split model_type '{}' yet (--tensor-parallel-size {}; "
        "it splits llama, qwen2, qwen3, mistral, phi3, gemma2, gemma3_text, gemma3, "
        "gemma4_text, gemma4, gemma3n_text, gemma3n, qwen3_moe, mixtral, minicpm)",
        source, type, config.tp.size);
  TANDEM_CHECK(config.tp.comm && config.tp.comm->size() == config.tp.size &&
                   config.tp.comm->rank() == config.tp.rank,
               "tensor parallelism: rank {} of {} needs its communicator", config.tp.rank,
               config.tp.size);
  try {
    check_tp_dims(config, config.tp.size);
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
}

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
  return resolve_quantization(parse_quantization_config(config.raw(), "config.json"), online);
}

std::string weight_format_name(const ModelConfig& config, const std::optional<QuantScheme>& online) {
  if (auto g = config.raw().find("gguf"); g != config.raw().end() && g->contains("weight_types"))
    return (*g)["weight_types"].get<std::string>();
  const std::string torch = config.raw().value("torch_dtype", std::string("bfloat16"));
  const std::string stored = torch == "float16" ? "f16" : torch == "float32" ? "f32" : "bf16";
  return model_quant_scheme(config, online).describe(stored);
}

std::string weight_format_name(const Model& model, const std::optional<QuantScheme>& online) {
  std::string name = weight_format_name(model.config(), online);
  if (model_quant_scheme(model.config(), online).fp8() && !model.experts_format().empty())
    name += "; MoE experts " + model.experts_format();
  return name;
}

std::unique_ptr<Model> load_model(const std::filesystem::path& dir, Backend& backend,
                                  const LoadOptions& options) {
  if (is_gguf_file(dir)) return load_gguf_model(dir, backend, options);
  ModelConfig config = ModelConfig::load(dir);
  config.lora = options.lora;
  config.tp = options.tp;
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
  check_tensor_parallel(config, type, (dir / "config.json").string());
  Checkpoint checkpoint = Checkpoint::open(dir);
  check_declared_layers(config, checkpoint, (dir / "config.json").string());
  checkpoint.set_quant(model_quant_scheme(config, options.online));
  return build(std::move(config), checkpoint, backend);
}

}  // namespace tandem
