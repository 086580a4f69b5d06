// Llama 2 / 3.x: the plain pre-norm decoder (GQA, SiLU MLP, RoPE incl. llama3 scaling).
// Mistral is the same network with a sliding window on every layer (from its config).
#include "model/arch/archs.h"
#include "model/config.h"
#include "model/decoder.h"

namespace tandem::arch {

std::unique_ptr<Model> build_llama(ModelConfig c, const Checkpoint& ck, Backend& be) {
  return std::make_unique<DecoderModel>(std::move(c), DecoderTraits{}, llama_style_weight_map(), ck, be);
}

std::unique_ptr<Model> build_mistral(ModelConfig c, const Checkpoint& ck, Backend& be) {
  return build_llama(std::move(c), ck, be);
}

}  // namespace tandem::arch
