// Model: one forward over a step's tokens, reading and writing the paged KV cache.
// The runner owns the KV storage (one PagedKv per layer that stores KV); the model says
// what each layer needs through kv_specs().
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "loader/quant_scheme.h"
#include "model/lora/lora_targets.h"
#include "model/vision/vision_tower.h"

namespace tandem {

struct ModelConfig;  // model/config.h

// KV geometry of one layer. Layers that read another layer's KV (KV sharing) have
// `shares_with` set and own no storage.
struct LayerKvSpec {
  int num_kv_heads = 0;
  int head_dim = 0;
  int window = 0;                 // 0 = full attention
  std::optional<int> shares_with; // layer whose KV this layer reads (none: its own)
};

class Model {
 public:
  virtual ~Model();
  const ModelConfig& config() const { return config_; }
  int64_t num_parameters() const { return num_parameters_; }
  virtual std::vector<LayerKvSpec> kv_specs() const = 0;
  // Runs the step and returns logits for step.sample_index: [S, vocab] f32 on the device;
  // when step.pool is defined, also writes its embedding rows' pooled hidden states
  // (model/pooled_hidden.h).
  // kv[l] is layer l's storage (undefined tensors for sharing layers), addressed through
  // its KV group's slot map and block table (step.kv(kv[l])).
  virtual Tensor forward(const StepTensors& step, std::span<PagedKv> kv) = 0;
  // The projections LoRA adapters may target (none unless config().lora is enabled); their
  // banks are the model's own tensors (model/lora/lora_targets.h).
  const LoraTargets& lora_targets() const { return lora_; }
  // How a MoE model's experts are held ("fp8_e4m3", "bf16 (why)": WeightLoader::
  // experts_format()); empty for a dense model. weight_format_name(Model) shows it.
  const std::string& experts_format() const { return experts_format_; }

  // Image input (model/vision/vision_spec.h): takes_images only with a vision tower; a
  // multimodal folder whose towers are not loaded says why (refuse_images).
  const VisionSpec& vision_spec() const { return vision_ ? vision_->spec() : no_vision_; }
  // The images' soft tokens, encoded together: [Σ num_soft_tokens, D] in the act dtype, on
  // the device, image i's rows after image i-1's (VisionTower::encode). Fails unless the
  // model takes images; each image must pass check_image(vision_spec(), ·).
  Tensor encode_images(std::span<const ImageInput* const> images);
  // The multimodal builders: the tower that encodes images, or why there is none.
  void set_vision(std::unique_ptr<VisionTower> tower);
  void refuse_images(std::string why) { no_vision_.refusal = std::move(why); }

 protected:
  explicit Model(ModelConfig config);

 private:
  // The config lives behind a pointer so that this header needs only a declaration of
  // ModelConfig: a translation unit that holds or runs a Model without reading its config
  // does not depend on model/config.h (touching it rebuilt most of the tree).
  std::unique_ptr<ModelConfig> owned_config_;

 protected:
  ModelConfig& config_;  // *owned_config_, for the whole life of the model
  int64_t num_parameters_ = 0;
  LoraTargets lora_;  // filled by the WeightLoader
  std::string experts_format_;           // experts_format()
  std::unique_ptr<VisionTower> vision_;  // null for a text model
  VisionSpec no_vision_;                 // what vision_spec() says without a tower
};

// How load_model loads: `online` quantizes a 16-bit checkpoint as --quantization asks
// (config.json's quantization_config wins when it declares one); `lora` is the room for
// adapters (none by default).
struct LoadOptions {
  std::optional<QuantScheme> online;
  LoraCapacity lora;
  // Tensor parallelism: load only rank tp.rank's slices (model/tp_slices.h). The decoder
  // architectures (DecoderModel) take it; others, GGUF files and multimodal folders are
  // refused when tp.size > 1.
  TpShard tp;
};

// Reads config.json, picks the architecture from the registry, loads the weights: as
// config.json's quantization_config declares (loader/quant_scheme.h), or, for a 16-bit
// checkpoint, quantized as `options.online` asks, with room for `options.lora` adapters.
// Throws tandem::Error (unknown model_type, missing tensor, bad shapes, bad files).
// `dir` may also be a GGUF file (or the first shard of a split one): load_gguf_model.
std::unique_ptr<Model> load_model(const std::filesystem::path& dir, Backend& backend,
                                  const LoadOptions& options = {});
// A GGUF file's model (model/gguf_translate.h): its metadata as the config, its tensors
// under Hugging Face names; --quantization is refused (the weights load as stored).
std::unique_ptr<Model> load_gguf_model(const std::filesystem::path& path, Backend& backend,
                                       const LoadOptions& options = {});
// The scheme load_model uses for `config` and `online`.
QuantScheme model_quant_scheme(const ModelConfig& config, const std::optional<QuantScheme>& online);
// What /stats and the ready card show as the weight format: "bf16", "fp8_e4m3 per-channel...",
// or a GGUF file's types ("Q4_K_M: q4_k 120, q6_k 25, f32 65", gguf_weight_summary).
std::string weight_format_name(const ModelConfig& config, const std::optional<QuantScheme>& online);
// The same for a loaded model, naming how its MoE experts are held when its weights are FP8
// ("fp8_e4m3 per-channel weights, … (quantized at load); MoE experts fp8_e4m3").
std::string weight_format_name(const Model& model, const std::optional<QuantScheme>& online);

}  // namespace tandem
