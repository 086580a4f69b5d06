// load_model for a GGUF file (model/model.h): the metadata becomes the config, the tensors a
// checkpoint under Hugging Face names (model/gguf_translate.h), and the architecture from
// the registry loads it like any folder. Block-type weights stay in their blocks: the
// weight loader hands them to the backend as stored (Backend::weight_dtype decides). Under
// tensor parallelism a rank reads its slices of them: whole block rows, or input columns
// cut between blocks (model/tp_slices.h).
#include "core/error.h"
#include "model/config.h"
#include "model/gguf_translate.h"
#include "model/registry.h"

namespace tandem {

std::unique_ptr<Model> load_gguf_model(const std::filesystem::path& path, Backend& backend,
                                       const LoadOptions& options) {
  if (options.online && options.online->fp8())
    fail("{}: --quantization {} applies to 16-bit checkpoints; a GGUF file's weights load as "
         "stored (use a file of the type you want)", path.string(), options.online->method);
  std::shared_ptr<const GgufModel> gguf = GgufModel::open(path);
  // A block type the backend cannot keep would reach a conversion that does not exist:
  // refuse it here, naming the tensor, the type and the backend.
  for (std::string_view name : gguf->tensor_names()) {
    const DType dtype = gguf->find(name)->info->dtype;
    if (dtype_is_block(dtype) && backend.weight_dtype(dtype) != dtype)
      fail("{}: tensor '{}' is {}, which the {} backend does not compute with", path.string(),
           name, dtype_name(dtype), backend.name());
  }
  GgufTranslation t = translate_gguf(*gguf);
  t.config["gguf"] = {{"file", path.string()}, {"weight_types", gguf_weight_summary(*gguf)}};
  ModelConfig config = ModelConfig::parse(t.config, path.string() + " (GGUF metadata)");
  for (auto& [kind, rope] : config.rope) rope.freq_divisors = t.rope_freq_divisors;
  config.lora = options.lora;
  config.tp = options.tp;  // each rank reads its slices of the blocks (model/tp_slices.h)
  check_tensor_parallel(config, config.model_type, path.string() + " (GGUF metadata)");
  ArchBuilder build = find_architecture(config.model_type);
  TANDEM_CHECK(build, "GGUF model_type '{}' has no architecture", config.model_type);
  Checkpoint checkpoint = Checkpoint::from_gguf(std::move(gguf), std::move(t.aliases));
  return build(std::move(config), checkpoint, backend);
}

}  // namespace tandem
