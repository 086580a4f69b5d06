// Phi-3: Llama's network with q|k|v and gate|up stored fused in the checkpoint; the map
// takes them as they are.
#include "model/arch/archs.h"
#include "model/config.h"
#include "model/decoder.h"

namespace tandem::arch {

std::unique_ptr<Model> build_phi3(ModelConfig c, const Checkpoint& ck, Backend& be) {
  WeightMap map = llama_style_weight_map();
  const std::string L = "model.layers.{i}.";
  set_rule(map, {"layers.{i}.qkv", {L + "self_attn.qkv_proj.weight"}});
  set_rule(map, {"layers.{i}.gate_up", {L + "mlp.gate_up_proj.weight"}});
  return std::make_unique<DecoderModel>(std::move(c), DecoderTraits{}, map, ck, be);
}

}  // namespace tandem::arch
