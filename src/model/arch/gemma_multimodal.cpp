// Multimodal Gemma folders (model_type gemma3 / gemma3n / gemma4; multimodal_config.h): the
// text model, built as its text-only architecture builds it, plus its vision tower.
//   Gemma 3: SigLIP (vision/siglip.h); an image's soft tokens see each other both ways on
//            every layer (HF's token_type_ids or-mask over the full and the sliding masks).
//   Gemma 4: its encoder (vision/gemma4_vision.h); both ways only with
//            use_bidirectional_attention "vision", and only on sliding layers.
//   Gemma 3n: the text model alone; the vision and audio towers are not loaded, and the
//            model says it takes no images (VisionSpec::refusal).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch/archs.h"
#include "model/arch/gemma4_config.h"
#include "model/config.h"
#include "model/vision/gemma4_vision.h"
#include "model/vision/siglip.h"

namespace tandem::arch {

namespace {

void require_multimodal(const ModelConfig& c, const Checkpoint& ck) {
  if (c.multimodal_raw().is_null())
    fail("{}: model_type '{}' needs a text_config and a vision_config in config.json",
         ck.dir().string(), c.multimodal_type.empty() ? c.model_type : c.multimodal_type);
}

}  // namespace

std::unique_ptr<Model> build_gemma3_multimodal(ModelConfig c, const Checkpoint& ck, Backend& be) {
  require_multimodal(c, ck);
  const SiglipConfig vision = parse_siglip_config(c);
  c.media_bidirectional.assign(size_t(c.num_layers), true);
  std::unique_ptr<Model> model = build_gemma3(std::move(c), ck, be);
  model->set_vision(std::make_unique<SiglipTower>(vision, model->config(), ck, be));
  return model;
}

std::unique_ptr<Model> build_gemma4_multimodal(ModelConfig c, const Checkpoint& ck, Backend& be) {
  require_multimodal(c, ck);
  apply_gemma4_defaults(c);
  const Gemma4VisionConfig vision = parse_gemma4_vision_config(c);
  c.media_bidirectional.clear();
  for (int i = 0; i < c.num_layers; i++)
    c.media_bidirectional.push_back(vision.bidirectional &&
                                    c.layer_kinds[size_t(i)] == LayerKind::Sliding);
  std::unique_ptr<Model> model = build_gemma4(std::move(c), ck, be);
  model->set_vision(std::make_unique<Gemma4VisionTower>(vision, model->config(), ck, be));
  return model;
}

std::unique_ptr<Model> build_gemma3n_multimodal(ModelConfig c, const Checkpoint& ck, Backend& be) {
  require_multimodal(c, ck);
  std::unique_ptr<Model> model = build_gemma3n(std::move(c), ck, be);
  const std::string why =
      "gemma3n: tandem loads the text model only (its vision and audio towers are not loaded), "
      "so it takes no images";
  fmt::print(stderr, "{}: {}\n", ck.dir().string(), why);
  model->refuse_images(why);
  return model;
}

}  // namespace tandem::arch
