// The declarative map from a checkpoint's tensor names to tandem's internal weights.
// Each architecture lists rules; fusing (q|k|v, gate|up) and stacking experts is done
// here, by the rules, never by special-case code in a model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/linear.h"
#include "loader/checkpoint.h"
#include "model/lora/lora_targets.h"
#include "model/tp_slices.h"

namespace tandem {

// One internal weight. `sources` are checkpoint names concatenated along dim 0, with
// "{i}" replaced by the layer index. A source holding "{e}" is read once per expert
// and the results are stacked along a new leading dim: [E, ...].
struct WeightRule {
  std::string name;                  // e.g. "layers.{i}.qkv"
  std::vector<std::string> sources;  // e.g. {"model.layers.{i}.self_attn.q_proj.weight", ...}
  bool optional = false;             // all sources absent → the weight is undefined
};

using WeightMap = std::vector<WeightRule>;

// Replaces the rule named `rule.name` in `map` (or appends it).
void set_rule(WeightMap& map, WeightRule rule);

class WeightLoader {
 public:
  // With `lora` (and its capacity enabled), every projection an adapter may target
  // (lora_projection()) gets LoRA slots and is recorded there.
  WeightLoader(const Checkpoint& checkpoint, Backend& backend, WeightMap map, int num_experts,
               LoraTargets* lora = nullptr);

  // Loads internal weight `name` (with "{i}" = layer) onto the backend, in the dtype the
  // backend holds a weight of the checkpoint's dtype in (Backend::weight_dtype), checking
  // that its shape is `expected`. Undefined tensor when the rule is
  // optional and absent, or when no rule has that name and `must_exist` is false.
  Tensor load(const std::string& name, int layer, Shape expected, bool must_exist = true);
  // The projection `name` [N, K] as a Linear: its weight, and the bias `name`_bias [N]
  // when the map has that rule and the checkpoint the tensors. Under an FP8 scheme
  // (checkpoint.quant()) an FP8 weight comes with its scales in `quant`, and online
  // quantization converts the quantizable ones (quantizable_weight_name) per channel
  // (fp8_linear_loader.cpp). With LoRA capacity, a projection lora_projection() names
  // also gets its slots (whatever its weight format: the adapter adds to its output).
  Linear load_linear(const std::string& name, int layer, Shape expected, bool must_exist = true);
  // A MoE block's stacked expert projection `name` [E, N, K] (a rule whose sources hold
  // "{e}"): 16-bit as load() reads it, or FP8 experts with their scales stacked as
  // linear.h describes. A backend without fp8_experts() refuses an FP8 checkpoint's
  // experts; experts online quantization (--quantization fp8) would convert stay 16-bit
  // there instead, said once on stderr and in experts_format().
  Linear load_experts(const std::string& name, int layer, Shape expected);
  // How the experts load_experts (or quantizes_stacked_experts) has loaded are held, for the
  // weight-format name: "" (none loaded), "fp8_e4m3", or the dtype they stay in ("bf16"),
  // with why where they stay so.
  const std::string& experts_format() const { return experts_format_; }
  // Stacked experts an architecture reads, cuts and scales itself (Gemma 4's 3-D
  // gate_up_proj and down_proj; `name` stored in `stored`): whether they load as FP8, which
  // is when the checkpoint holds them in e4m3 (`tandem quantize` writes them so:
  // stacked_experts_name) or under online FP8 quantization on a backend with fp8_experts().
  // Sets experts_format() as load_experts does: "fp8_e4m3", or the dtype they stay in and
  // why. e4m3 experts on a backend without FP8 experts, or in a scheme other than per
  // channel with dynamic inputs, are an error naming `name`.
  bool quantizes_stacked_experts(const std::string& name, DType stored);
  // Such experts [E, N, K] on the host (any float dtype) quantized per output channel — the
  // E·N rows of [E·N, K] by quantize_fp8_per_channel — into the stacked layout linear.h
  // describes: weight F8E4M3 [E, N, K], weight_scale f32 [E, N], dynamic inputs. Counts no
  // parameters (the caller does).
  Linear quantize_stacked_experts(const Tensor& host);
  // Such experts already in e4m3 (host weight F8E4M3 [E, N, K] and f32 scales [E, N], cut
  // and scaled by the caller) in the same layout as quantize_stacked_experts makes.
  Linear stacked_fp8_experts(const Tensor& weight, const Tensor& scale);
  // The output projection "lm_head" [V, D]; when the checkpoint has none, `embed` if the
  // config ties them, else an error naming the checkpoint.
  Linear load_lm_head(const Tensor& embed, Shape expected, bool tied);
  // Total parameters loaded so far.
  int64_t num_parameters() const { return num_parameters_; }
  // Tensor parallelism (model/tp_slices.h): from now on every weight is read as `slicer`
  // cuts it for rank `rank`, and the shapes given to load* are the slice's. A weight held
  // whole counts as parameters on rank 0 only, so the ranks' counts add up to the model's.
  // LoRA slots are cut like their projections, a mixed-type (GGUF) projection's pieces by
  // their rows, FP8 projections and experts with their scales (or quantized each rank its
  // own slice, online: fp8_linear_loader.cpp).
  void set_slicer(WeightSlicer slicer, int rank);

 private:
  const WeightRule* find(const std::string& name) const;
  Tensor read_source(const std::string& pattern, int layer, int expert) const;
  // The host tensor of weight `name`, fused and stacked by its rule, its shape checked;
  // nullopt when absent (as load() describes).
  std::optional<Tensor> read(const std::string& name, int layer, Shape expected, bool must_exist);
  // On the backend, in the dtype it holds a weight of the host's dtype in (weight_dtype).
  Tensor upload(const Tensor& host);
  // FP8 (fp8_linear_loader.cpp): whether the rule's projection loads as FP8, and loading it.
  // An FP8 projection's weight and scales on the host (expert: -1, or the "{e}" of a
  // stacked rule), its shards fused.
  struct Fp8Host {
    Tensor weight;      // F8E4M3 [N, K]
    LinearQuant quant;  // weight_scale, input_scale: host f32
  };
  bool loads_as_fp8(const WeightRule& rule, int layer) const;
  // A fused rule whose sources are stored in different dtypes (a GGUF Q4_K_M's q4_k q and k,
  // q6_k v), and loading it as one Linear of pieces (linear.h), each with its bias slice.
  bool mixed_types(const WeightRule& rule, int layer) const;
  Linear load_pieces(const WeightRule& rule, int layer, Shape expected);
  Fp8Host read_fp8(const WeightRule& rule, int layer, int expert, Shape expected);
  Linear load_fp8_linear(const WeightRule& rule, int layer, Shape expected);
  void report_progress(int64_t bytes);
  // Allocates l's LoRA bank and records the target (its shards from the rule's sources).
  void add_lora_slots(Linear& l, const WeightRule& rule, int layer);

  const Checkpoint& checkpoint_;
  Backend& backend_;
  WeightMap map_;
  int num_experts_;
  LoraTargets* lora_;
  int64_t num_parameters_ = 0;
  WeightSlicer slicer_;  // empty: every weight whole
  int tp_rank_ = 0;
  bool counts_upload_ = true;  // whether the weight being read counts as parameters
  int64_t total_bytes_ = 0;   // the checkpoint's files, for the progress line
  int64_t loaded_bytes_ = 0;
  int reported_tenths_ = 0;
  std::string experts_format_;  // experts_format()
};

// Whether internal weight `name` is a projection LoRA adapters may target: the attention
// and MLP projections of a layer ("layers.{i}.qkv", "layers.{i}.o", "layers.{i}.gate_up", ...),
// not routers, per-layer inputs or the LM head.
bool lora_projection(const std::string& name);

// "model.layers.{i}.x" with i = 3 → "model.layers.3.x" (and "{e}" likewise).
std::string expand_name(const std::string& pattern, int layer, int expert = -1);

}  // namespace tandem
