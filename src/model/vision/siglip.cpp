#include "model/vision/siglip.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/multimodal_names.h"
#include "model/vision/config_field.h"

namespace tandem {

namespace {

constexpr const char* kSiglipSrc = "config.json (gemma3 vision_config)";

WeightMap siglip_weight_map(const std::string& V) {
  const std::string L = V + "encoder.layers.{i}.", A = L + "self_attn.";
  return {
      {"patch", {V + "embeddings.patch_embedding.weight"}},
      {"patch_bias", {V + "embeddings.patch_embedding.bias"}},
      {"positions", {V + "embeddings.position_embedding.weight"}},
      {"layers.{i}.ln1", {L + "layer_norm1.weight"}},
      {"layers.{i}.ln1_bias", {L + "layer_norm1.bias"}},
      {"layers.{i}.qkv", {A + "q_proj.weight", A + "k_proj.weight", A + "v_proj.weight"}},
      {"layers.{i}.qkv_bias", {A + "q_proj.bias", A + "k_proj.bias", A + "v_proj.bias"}},
      {"layers.{i}.o", {A + "out_proj.weight"}},
      {"layers.{i}.o_bias", {A + "out_proj.bias"}},
      {"layers.{i}.ln2", {L + "layer_norm2.weight"}},
      {"layers.{i}.ln2_bias", {L + "layer_norm2.bias"}},
      {"layers.{i}.fc1", {L + "mlp.fc1.weight"}},
      {"layers.{i}.fc1_bias", {L + "mlp.fc1.bias"}},
      {"layers.{i}.fc2", {L + "mlp.fc2.weight"}},
      {"layers.{i}.fc2_bias", {L + "mlp.fc2.bias"}},
      {"post_ln", {V + "post_layernorm.weight"}},
      {"post_ln_bias", {V + "post_layernorm.bias"}},
  };
}

// mm_input_projection_weight is stored [vision, text] (x · W): a Linear wants [text, vision].
Tensor transposed(const Checkpoint& ck, const std::string& name, int64_t rows, int64_t cols,
                  Backend& be) {
  Tensor t = ck.get(name);
  if (!(t.shape == Shape{rows, cols}))
    fail("{}: weight '{}' has shape {} but the config implies [{}, {}]", ck.dir().string(), name,
         t.shape.str(), rows, cols);
  TANDEM_CHECK(dtype_size(t.dtype) > 0, "{}: weight '{}' has a block dtype", ck.dir().string(),
               name);
  const size_t e = dtype_size(t.dtype);
  Tensor host = Tensor::empty_host(t.dtype, {cols, rows});
  const char* src = static_cast<const char*>(t.data);
  char* dst = static_cast<char*>(host.data);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      std::memcpy(dst + (c * rows + r) * e, src + (r * cols + c) * e, e);
  return be.upload(host, be.weight_dtype(t.dtype));
}

}  // namespace

int SiglipConfig::tokens_per_side() const {
  return int(std::lround(std::sqrt(double(mm_tokens_per_image))));
}

SiglipConfig parse_siglip_config(const ModelConfig& c) {
  const nlohmann::json& top = c.multimodal_raw();
  const nlohmann::json& v = vision_config_of(top);
  SiglipConfig s;
  s.hidden_size = config_field(v, "hidden_size", s.hidden_size, kSiglipSrc);
  s.intermediate_size = config_field(v, "intermediate_size", s.intermediate_size, kSiglipSrc);
  s.num_layers = config_field(v, "num_hidden_layers", s.num_layers, kSiglipSrc);
  s.num_heads = config_field(v, "num_attention_heads", s.num_heads, kSiglipSrc);
  s.image_size = config_field(v, "image_size", s.image_size, kSiglipSrc);
  s.patch_size = config_field(v, "patch_size", s.patch_size, kSiglipSrc);
  s.layer_norm_eps = float(config_field(v, "layer_norm_eps", 1e-6, kSiglipSrc));
  const std::string act = config_field<std::string>(v, "hidden_act", "gelu_pytorch_tanh", kSiglipSrc);
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh" && act != "gelu_new")
    fail("{}: hidden_act '{}' is not supported (gelu_pytorch_tanh)", kSiglipSrc, act);
  if (int ch = config_field(v, "num_channels", 3, kSiglipSrc); ch != 3)
    fail("{}: num_channels must be 3 (got {})", kSiglipSrc, ch);
  s.mm_tokens_per_image = config_field(top, "mm_tokens_per_image", s.mm_tokens_per_image, kSiglipSrc);
  s.image_token_id =
      config_field(top, "image_token_index", "image_token_id", s.image_token_id, kSiglipSrc);
  s.boi_token_id = config_field(top, "boi_token_index", "boi_token_id", s.boi_token_id, kSiglipSrc);
  s.eoi_token_id = config_field(top, "eoi_token_index", "eoi_token_id", s.eoi_token_id, kSiglipSrc);
  if (s.hidden_size <= 0 || s.num_heads <= 0 || s.hidden_size % s.num_heads != 0 ||
      s.intermediate_size <= 0 || s.num_layers <= 0)
    fail(
        "{}: hidden_size {} must be a positive multiple of num_attention_heads {} (and the "
        "layer counts positive)",
        kSiglipSrc, s.hidden_size, s.num_heads);
  if (s.patch_size <= 0 || s.image_size <= 0 || s.image_size % s.patch_size != 0)
    fail("{}: image_size {} must be a positive multiple of patch_size {}", kSiglipSrc, s.image_size,
         s.patch_size);
  const int side = s.patches_per_side(), tokens = s.tokens_per_side();
  if (s.mm_tokens_per_image <= 0 || tokens * tokens != s.mm_tokens_per_image || side % tokens != 0)
    fail("{}: mm_tokens_per_image {} must be a square whose side divides the {} patches per side",
         kSiglipSrc, s.mm_tokens_per_image, side);
  for (int32_t id : {s.image_token_id, s.boi_token_id, s.eoi_token_id})
    if (id < 0 || id >= c.vocab_size)
      fail("{}: image token id {} is outside the vocabulary (0..{})", kSiglipSrc, id, c.vocab_size - 1);
  return s;
}

SiglipTower::SiglipTower(const SiglipConfig& config, const ModelConfig& text, const Checkpoint& ck,
                         Backend& be)
    : config_(config), be_(be) {
  const SiglipConfig& s = config_;
  const std::string V =
      require_prefix(ck,
                     {"vision_tower.vision_model.", "model.vision_tower.vision_model.",
                      "vision_tower.", "model.vision_tower."},
                     "embeddings.patch_embedding.weight", "vision tower");
  const std::string P =
      require_prefix(ck, {"multi_modal_projector.", "model.multi_modal_projector."},
                     "mm_input_projection_weight", "multi-modal projector");
  WeightLoader w(ck, be, siglip_weight_map(V), 0);
  const int64_t D = s.hidden_size, F = s.intermediate_size, p = s.patch_size;
  const int64_t N = int64_t(s.patches_per_side()) * s.patches_per_side();
  patch_ = tower_linear(w, "patch", -1, {D, 3, p, p});
  patch_.weight = patch_.weight.reshape({D, 3 * p * p});
  positions_ = w.load("positions", -1, {N, D});
  for (int i = 0; i < s.num_layers; i++) {
    Layer& l = layers_.emplace_back();
    l.ln1 = {w.load("layers.{i}.ln1", i, {D}), w.load("layers.{i}.ln1_bias", i, {D}),
             s.layer_norm_eps};
    l.qkv = tower_linear(w, "layers.{i}.qkv", i, {3 * D, D});
    l.o = tower_linear(w, "layers.{i}.o", i, {D, D});
    l.ln2 = {w.load("layers.{i}.ln2", i, {D}), w.load("layers.{i}.ln2_bias", i, {D}),
             s.layer_norm_eps};
    l.fc1 = tower_linear(w, "layers.{i}.fc1", i, {F, D});
    l.fc2 = tower_linear(w, "layers.{i}.fc2", i, {D, F});
  }
  post_ln_ = {w.load("post_ln", -1, {D}), w.load("post_ln_bias", -1, {D}), s.layer_norm_eps};
  WeightLoader pw(ck, be, {{"soft_norm", {P + "mm_soft_emb_norm.weight"}}}, 0);
  soft_norm_ = {pw.load("soft_norm", -1, {D}), s.layer_norm_eps, 1.f};
  projection_.weight = transposed(ck, P + "mm_input_projection_weight", D, text.hidden_size, be);
  num_parameters_ = w.num_parameters() + pw.num_parameters() + D * text.hidden_size;

  spec_.takes_images = true;
  spec_.family = VisionFamily::Gemma3;
  spec_.image_token_id = s.image_token_id;
  spec_.boi_token_id = s.boi_token_id;
  spec_.eoi_token_id = s.eoi_token_id;
  spec_.bidirectional = true;
  spec_.patch_size = s.patch_size;
  spec_.image_size = s.image_size;
  spec_.soft_tokens_per_image = s.mm_tokens_per_image;
  spec_.hidden_size = text.hidden_size;
}

// The images' patches as rows (conv weight order: channel, row, column within the patch;
// patches row-major), one GEMM, plus the learned positions.
Tensor SiglipTower::embed_patches(std::span<const ImageInput* const> images) {
  const int64_t p = config_.patch_size, side = config_.patches_per_side(), N = side * side;
  const int64_t S = config_.image_size, B = int64_t(images.size());
  Tensor patches = Tensor::empty_host(DType::F32, {B * N, 3 * p * p});
  float* out = patches.ptr<float>();
  for (int64_t b = 0; b < B; b++) {
    const float* px = images[size_t(b)]->pixels.ptr<float>();
    for (int64_t py = 0; py < side; py++)
      for (int64_t qx = 0; qx < side; qx++)
        for (int64_t c = 0; c < 3; c++)
          for (int64_t ky = 0; ky < p; ky++)
            for (int64_t kx = 0; kx < p; kx++) *out++ = px[(c * S + py * p + ky) * S + qx * p + kx];
  }
  Tensor h = linear(be_, be_.upload(patches, be_.act_dtype()), patch_);
  std::vector<int32_t> ids;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < N; i++) ids.push_back(int32_t(i));
  be_.add(h, h, embedding(be_, positions_, upload_i32(be_, ids), 1.f));
  return h;
}

void SiglipTower::layer_forward(const Layer& l, Tensor& h, const ImageBatch& batch) {
  const int64_t T = h.dim(0), D = config_.hidden_size, H = config_.num_heads, Dh = D / H;
  Tensor qkv = linear(be_, layer_norm(be_, h, l.ln1), l.qkv);
  Tensor q = be_.alloc(be_.act_dtype(), {T, D}), k = be_.alloc(be_.act_dtype(), {T, D}),
         v = be_.alloc(be_.act_dtype(), {T, D});
  be_.split_columns(qkv, {&q, &k, &v});
  Tensor attn = image_attention(be_, batch, q.reshape({T, H, Dh}), k.reshape({T, H, Dh}),
                                v.reshape({T, H, Dh}), float(1.0 / std::sqrt(double(Dh))));
  be_.add(h, h, linear(be_, attn.reshape({T, D}), l.o));
  Tensor up = linear(be_, layer_norm(be_, h, l.ln2), l.fc1);
  be_.add(h, h, linear(be_, activation(be_, up, config_.act, ones_), l.fc2));
}

// AvgPool2d(k) over each image's patch grid (the window summed row by row, then / k²),
// the (1 + w) RMSNorm, the projection.
Tensor SiglipTower::project(const Tensor& h, int num_images) {
  const int side = config_.patches_per_side(), ts = config_.tokens_per_side(), k = side / ts;
  const int64_t N = int64_t(side) * side, M = int64_t(ts) * ts;
  std::vector<std::vector<int32_t>> index(size_t(k) * k);
  for (int64_t b = 0; b < num_images; b++)
    for (int oy = 0; oy < ts; oy++)
      for (int ox = 0; ox < ts; ox++)
        for (int dy = 0; dy < k; dy++)
          for (int dx = 0; dx < k; dx++)
            index[size_t(dy * k + dx)].push_back(
                int32_t(b * N + (oy * k + dy) * side + ox * k + dx));
  Tensor pooled = sum_rows(be_, h, index);  // [B·M, D]
  be_.scale(pooled, 1.f / float(k * k));
  rms_norm_in_place(be_, pooled, soft_norm_);
  TANDEM_CHECK(pooled.dim(0) == num_images * M, "siglip: pooled {} rows", pooled.dim(0));
  return linear(be_, pooled, projection_);
}

Tensor SiglipTower::encode(std::span<const ImageInput* const> images) {
  TANDEM_CHECK(!images.empty(), "siglip: no images to encode");
  const int N = config_.patches_per_side() * config_.patches_per_side();
  const std::vector<int> lengths(images.size(), N);
  const ImageBatch batch = make_image_batch(be_, lengths);
  Tensor h = embed_patches(images);
  for (const Layer& l : layers_) layer_forward(l, h, batch);
  be_.layer_norm(h, h, post_ln_.weight, post_ln_.bias, post_ln_.eps);
  return project(h, int(images.size()));
}

}  // namespace tandem
