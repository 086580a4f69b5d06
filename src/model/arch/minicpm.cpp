// MiniCPM (model_type "minicpm"): a Llama with μP scalings. From its config:
//   scale_emb       embeddings are multiplied by it;
//   scale_depth     each block's output is multiplied by scale_depth / √num_layers;
//   dim_model_base  the final hidden state is divided by hidden_size / dim_model_base.
// transformers has no class for it; the remote modeling code applies exactly these three.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch/archs.h"
#include "model/config.h"
#include "model/decoder.h"

namespace tandem::arch {

DecoderTraits minicpm_traits(const ModelConfig& c) {
  auto number = [&](const char* key, double fallback) {
    auto it = c.raw().find(key);
    if (it == c.raw().end() || it->is_null()) return fallback;
    if (!it->is_number() || it->get<double>() <= 0)
      fail("config.json: '{}' must be a positive number, got {}", key, it->dump());
    return it->get<double>();
  };
  DecoderTraits t;
  t.embedding_multiplier = float(number("scale_emb", 1.0));
  t.residual_multiplier = float(number("scale_depth", std::sqrt(double(c.num_layers))) /
                                std::sqrt(double(c.num_layers)));
  t.logit_divisor = float(double(c.hidden_size) / number("dim_model_base", double(c.hidden_size)));
  return t;
}

std::unique_ptr<Model> build_minicpm(ModelConfig c, const Checkpoint& ck, Backend& be) {
  DecoderTraits traits = minicpm_traits(c);
  return std::make_unique<DecoderModel>(std::move(c), traits, llama_style_weight_map(), ck, be);
}

}  // namespace tandem::arch
