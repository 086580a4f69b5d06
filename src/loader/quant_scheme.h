// How a checkpoint's linear weights are quantized: config.json's `quantization_config`
// parsed once, or the request to quantize a 16-bit checkpoint while loading it
// (`--quantization fp8`). Only FP8 (e4m3) is read; any other method, format or field
// value is refused with an error naming the field.
//
// The formats (tensor names beside each projection's `X.weight`, F8_E4M3 [out, in]):
//   compressed-tensors (llm-compressor), "format": "float-quantized" (or "naive-quantized"):
//     weights strategy "tensor": X.weight_scale [1]; "channel": X.weight_scale [out, 1];
//     input_activations dynamic "token" (s_x = amax/448 per row), or static "tensor":
//     X.input_scale [1].
//   "quant_method": "fp8" (vLLM, DeepSeek-V3, Qwen3-FP8): without weight_block_size,
//     X.weight_scale [1] and, for activation_scheme "static", X.input_scale [1]; with
//     weight_block_size [bn, bk], X.weight_scale_inv f32 [⌈out/bn⌉, ⌈in/bk⌉] (a
//     multiplier despite the name) and activations per token per bk columns.
// In every layout W ≈ weight × scale; a projection whose weight is stored 16-bit (lm_head,
// the `ignore` / `modules_to_not_convert` modules) stays 16-bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem {

enum class Fp8Weights : uint8_t { PerTensor, PerChannel, Block };
enum class Fp8Inputs : uint8_t { Dynamic, Static };

struct QuantScheme {
  enum class Source : uint8_t {
    None,        // 16-bit weights, used as stored
    Checkpoint,  // FP8 weights and scales read from the checkpoint
    Online,      // 16-bit weights quantized at load: per channel, dynamic per-token inputs
  };
  Source source = Source::None;
  std::string method;  // "compressed-tensors", "fp8" or "online"
  Fp8Weights weights = Fp8Weights::PerChannel;
  int block_n = 0, block_k = 0;  // Block only
  Fp8Inputs inputs = Fp8Inputs::Dynamic;
  std::vector<std::string> ignore;  // modules the checkpoint left unquantized

  bool fp8() const { return source != Source::None; }
  // The weight-format name shown by /stats, /v1/models and the ready card:
  // "bf16" (the stored dtype), "fp8 per-channel, dynamic per-token inputs (compressed-tensors)"...
  std::string describe(const std::string& stored_dtype) const;
};

// Parses config.json's quantization_config (absent or null: Source::None); `source` names
// the file in errors.
QuantScheme parse_quantization_config(const nlohmann::json& config, const std::string& source);
// --quantization: "fp8" → the online scheme; nullopt or "none" → std::nullopt; anything
// else is an error naming the flag.
std::optional<QuantScheme> online_quantization(const std::optional<std::string>& flag);
// The scheme a load uses: the checkpoint's when it is quantized (an FP8 checkpoint is not
// requantized), else the online one when asked for.
QuantScheme resolve_quantization(QuantScheme checkpoint, const std::optional<QuantScheme>& online);

// The name of the tensor `suffix` beside the weight `weight_name` ("a.q_proj.weight",
// "weight_scale" → "a.q_proj.weight_scale").
std::string scale_tensor_name(const std::string& weight_name, const std::string& suffix);
// Whether online quantization and `tandem quantize` convert the checkpoint weight
// `name`: the 2-D weights of the attention and MLP projections ("*_proj.weight") and of
// the MoE experts (Qwen3-MoE's "*_proj.weight", Mixtral's "experts.{e}.w1/w2/w3.weight").
// Embeddings, lm_head, norms, MoE routers and the small Gemma 3n side projections stay
// 16-bit; Gemma 4's stacked experts are 3-D (stacked_experts_name).
bool quantizable_weight_name(const std::string& name);
// Whether `name` is one of Gemma 4's stacked 3-D expert projections ("….experts.gate_up_proj"
// [E, 2·Fe, D], "….experts.down_proj" [E, D, Fe]), which online quantization and `tandem
// quantize` convert per output channel of each expert: weight F8_E4M3 [E, N, K] under the
// same name, its scales BF16 [E, N, 1] under stacked_scale_name(name).
bool stacked_experts_name(const std::string& name);
// "a.experts.down_proj" → "a.experts.down_proj_weight_scale".
std::string stacked_scale_name(const std::string& name);
// Fails, naming the folder, the tensor and the first bad value, unless every f32 scale in
// `scales` is finite and ≥ 0 (> 0 with `positive`: a static input scale divides). A NaN or
// infinite scale would turn every logit it touches into NaN.
void check_fp8_scales(const std::string& dir, const std::string& name, const float* scales,
                      int64_t count, bool positive = false);

}  // namespace tandem
