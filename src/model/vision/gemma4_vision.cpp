#include "model/vision/gemma4_vision.h"

#include <cmath>

#include "core/error.h"
#include "model/multimodal_names.h"
#include "model/rope.h"
#include "model/vision/config_field.h"

namespace tandem {

namespace {

constexpr const char* kGemma4VisionSrc = "config.json (gemma4 vision_config)";
const char* const kProjections[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                    "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                    "mlp.down_proj"};

WeightMap gemma4_vision_map(const std::string& V) {
  const std::string L = V + "encoder.layers.{i}.";
  WeightMap map = {
      {"patch", {V + "patch_embedder.input_proj.weight"}},
      {"pos_table", {V + "patch_embedder.position_embedding_table"}},
      {"std_bias", {V + "std_bias"}},
      {"std_scale", {V + "std_scale"}},
      {"layers.{i}.input_norm", {L + "input_layernorm.weight"}},
      {"layers.{i}.post_attn_norm", {L + "post_attention_layernorm.weight"}},
      {"layers.{i}.pre_ffn_norm", {L + "pre_feedforward_layernorm.weight"}},
      {"layers.{i}.post_ffn_norm", {L + "post_feedforward_layernorm.weight"}},
      {"layers.{i}.q_norm", {L + "self_attn.q_norm.weight"}},
      {"layers.{i}.k_norm", {L + "self_attn.k_norm.weight"}},
  };
  for (const char* stem : kProjections)
    map.push_back({std::string("layers.{i}.") + stem, {L + stem + ".linear.weight"}});
  return map;
}

// A scalar buffer (a clipped linear's bound) as a float; `fallback` when absent.
float scalar_or(const Checkpoint& ck, const std::string& name, float fallback) {
  if (!ck.has(name)) return fallback;
  Tensor t = ck.get(name);
  TANDEM_CHECK(t.numel() == 1 && dtype_size(t.dtype) > 0, "{}: '{}' must be a scalar (got {})",
               ck.dir().string(), name, t.shape.str());
  float v = 0.f;
  convert_to_f32(t.data, t.dtype, &v, 1);
  return v;
}

// positions[(n · H + h) · 2 + part] = the patch's x (part 0) or y (part 1): the sub-heads of
// half a head that the 2D RoPE rotates (each with one axis's position).
StepTensors rope_positions(Backend& be, std::span<const ImageInput* const> images, int heads) {
  std::vector<int32_t> pos;
  for (const ImageInput* im : images)
    for (size_t n = 0; 2 * n < im->position_ids.size(); n++)
      for (int h = 0; h < heads; h++) {
        pos.push_back(im->position_ids[2 * n]);
        pos.push_back(im->position_ids[2 * n + 1]);
      }
  StepTensors s;
  s.positions = upload_i32(be, pos);
  s.num_tokens = int(pos.size());
  return s;
}

}  // namespace

Gemma4VisionConfig parse_gemma4_vision_config(const ModelConfig& c) {
  const nlohmann::json& top = c.multimodal_raw();
  const nlohmann::json& v = vision_config_of(top);
  Gemma4VisionConfig g;
  g.hidden_size = config_field(v, "hidden_size", g.hidden_size, kGemma4VisionSrc);
  g.intermediate_size = config_field(v, "intermediate_size", g.intermediate_size, kGemma4VisionSrc);
  g.num_layers = config_field(v, "num_hidden_layers", g.num_layers, kGemma4VisionSrc);
  g.num_heads = config_field(v, "num_attention_heads", g.num_heads, kGemma4VisionSrc);
  g.num_kv_heads = config_field(v, "num_key_value_heads", g.num_kv_heads, kGemma4VisionSrc);
  g.head_dim = config_field(v, "head_dim", g.head_dim, kGemma4VisionSrc);
  g.rms_norm_eps = float(config_field(v, "rms_norm_eps", 1e-6, kGemma4VisionSrc));
  const nlohmann::json rope = config_field(v, "rope_parameters", nlohmann::json::object(), kGemma4VisionSrc);
  g.rope_theta = config_field(rope, "rope_theta", g.rope_theta, kGemma4VisionSrc);
  const std::string rope_type = config_field<std::string>(rope, "rope_type", "default", kGemma4VisionSrc);
  if (rope_type != "default" && rope_type != "axial")
    fail("{}: rope_type '{}' is not supported (default, axial)", kGemma4VisionSrc, rope_type);
  g.pooling_kernel_size = config_field(v, "pooling_kernel_size", g.pooling_kernel_size, kGemma4VisionSrc);
  g.patch_size = config_field(v, "patch_size", g.patch_size, kGemma4VisionSrc);
  g.position_embedding_size =
      config_field(v, "position_embedding_size", g.position_embedding_size, kGemma4VisionSrc);
  g.use_clipped_linears = config_field(v, "use_clipped_linears", false, kGemma4VisionSrc);
  g.standardize = config_field(v, "standardize", false, kGemma4VisionSrc);
  const std::string act =
      config_field<std::string>(v, "hidden_activation", "gelu_pytorch_tanh", kGemma4VisionSrc);
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh" && act != "gelu_new")
    fail("{}: hidden_activation '{}' is not supported (gelu_pytorch_tanh)", kGemma4VisionSrc, act);
  g.image_token_id =
      config_field(top, "image_token_id", "image_token_index", g.image_token_id, kGemma4VisionSrc);
  g.boi_token_id = config_field(top, "boi_token_id", "boi_token_index", g.boi_token_id, kGemma4VisionSrc);
  g.eoi_token_id = config_field(top, "eoi_token_id", "eoi_token_index", g.eoi_token_id, kGemma4VisionSrc);
  g.bidirectional =
      config_field<std::string>(c.raw(), "use_bidirectional_attention", "", kGemma4VisionSrc) == "vision";
  if (g.hidden_size <= 0 || g.intermediate_size <= 0 || g.num_layers <= 0 || g.num_heads <= 0 ||
      g.num_kv_heads <= 0 || g.num_heads % g.num_kv_heads != 0)
    fail(
        "{}: sizes must be positive and num_attention_heads ({}) a multiple of "
        "num_key_value_heads ({})",
        kGemma4VisionSrc, g.num_heads, g.num_kv_heads);
  if (g.head_dim <= 0 || g.head_dim % 4 != 0)
    fail("{}: head_dim {} must be a positive multiple of 4 (2D RoPE: two even halves)", kGemma4VisionSrc,
         g.head_dim);
  if (g.patch_size <= 0 || g.pooling_kernel_size <= 0 || g.position_embedding_size <= 0)
    fail("{}: patch_size {}, pooling_kernel_size {} and position_embedding_size {} must be > 0",
         kGemma4VisionSrc, g.patch_size, g.pooling_kernel_size, g.position_embedding_size);
  for (int32_t id : {g.image_token_id, g.boi_token_id, g.eoi_token_id})
    if (id < 0 || id >= c.vocab_size)
      fail("{}: image token id {} is outside the vocabulary (0..{})", kGemma4VisionSrc, id, c.vocab_size - 1);
  return g;
}

Gemma4VisionTower::Gemma4VisionTower(const Gemma4VisionConfig& config, const ModelConfig& text,
                                     const Checkpoint& ck, Backend& be)
    : config_(config), be_(be) {
  const Gemma4VisionConfig& g = config_;
  prefix_ =
      require_prefix(ck, {"model.vision_tower.", "vision_tower.", "vision_tower.vision_model."},
                     "patch_embedder.input_proj.weight", "vision tower");
  const std::string E = require_prefix(ck, {"model.embed_vision.", "embed_vision."},
                                       "embedding_projection.weight", "vision embedder");
  WeightLoader w(ck, be, gemma4_vision_map(prefix_), 0);
  const int64_t D = g.hidden_size, Dh = g.head_dim, p = g.patch_size;
  patch_.weight = w.load("patch", -1, {D, 3 * p * p});
  Tensor table = w.load("pos_table", -1, {2, g.position_embedding_size, D});
  pos_x_ = table.slice_rows(0, 1).reshape({g.position_embedding_size, D});
  pos_y_ = table.slice_rows(1, 1).reshape({g.position_embedding_size, D});
  const Tensor ones_head = ones(be, g.head_dim);
  for (int i = 0; i < g.num_layers; i++) layers_.push_back(load_layer(w, ck, i, ones_head));
  RopeConfig axis;
  axis.theta = g.rope_theta;
  rope_ = make_rope(axis, int(Dh / 2), 0);
  if (g.standardize) {
    std_bias_ = w.load("std_bias", -1, {D}).reshape({1, D});
    std_scale_ = w.load("std_scale", -1, {D});
  }
  embed_norm_ = {ones(be, D), g.rms_norm_eps, 0.f};
  WeightLoader ew(ck, be, {{"proj", {E + "embedding_projection.weight"}}}, 0);
  embed_proj_.weight = ew.load("proj", -1, {text.hidden_size, D});
  num_parameters_ = w.num_parameters() + ew.num_parameters();

  spec_.takes_images = true;
  spec_.family = VisionFamily::Gemma4;
  spec_.image_token_id = g.image_token_id;
  spec_.boi_token_id = g.boi_token_id;
  spec_.eoi_token_id = g.eoi_token_id;
  spec_.bidirectional = g.bidirectional;
  spec_.patch_size = g.patch_size;
  spec_.pooling_kernel_size = g.pooling_kernel_size;
  spec_.max_patch_position = g.position_embedding_size;
  spec_.hidden_size = text.hidden_size;
}

Gemma4VisionTower::Layer Gemma4VisionTower::load_layer(WeightLoader& w, const Checkpoint& ck, int i,
                                                       const Tensor& ones_head) {
  const Gemma4VisionConfig& g = config_;
  const int64_t D = g.hidden_size, F = g.intermediate_size, Dh = g.head_dim;
  const int64_t H = g.num_heads, Hkv = g.num_kv_heads;
  auto norm = [&](const char* name, int64_t width) {
    return RmsNorm{w.load(name, i, {width}), g.rms_norm_eps, 0.f};
  };
  Layer l;
  l.input_norm = norm("layers.{i}.input_norm", D);
  l.post_attn_norm = norm("layers.{i}.post_attn_norm", D);
  l.pre_ffn_norm = norm("layers.{i}.pre_ffn_norm", D);
  l.post_ffn_norm = norm("layers.{i}.post_ffn_norm", D);
  l.q_norm = norm("layers.{i}.q_norm", Dh);
  l.k_norm = norm("layers.{i}.k_norm", Dh);
  l.v_norm = {ones_head, g.rms_norm_eps, 0.f};
  l.q = load_clipped(w, ck, "self_attn.q_proj", i, {H * Dh, D});
  l.k = load_clipped(w, ck, "self_attn.k_proj", i, {Hkv * Dh, D});
  l.v = load_clipped(w, ck, "self_attn.v_proj", i, {Hkv * Dh, D});
  l.o = load_clipped(w, ck, "self_attn.o_proj", i, {D, H * Dh});
  l.gate = load_clipped(w, ck, "mlp.gate_proj", i, {F, D});
  l.up = load_clipped(w, ck, "mlp.up_proj", i, {F, D});
  l.down = load_clipped(w, ck, "mlp.down_proj", i, {D, F});
  return l;
}

ClippedLinear Gemma4VisionTower::load_clipped(WeightLoader& w, const Checkpoint& ck,
                                              const std::string& stem, int layer, Shape expected) {
  ClippedLinear l;
  l.linear.weight = w.load("layers.{i}." + stem, layer, expected);
  if (!config_.use_clipped_linears) return l;
  const std::string base = prefix_ + "encoder.layers." + std::to_string(layer) + "." + stem + ".";
  l.in_min = scalar_or(ck, base + "input_min", l.in_min);
  l.in_max = scalar_or(ck, base + "input_max", l.in_max);
  l.out_min = scalar_or(ck, base + "output_min", l.out_min);
  l.out_max = scalar_or(ck, base + "output_max", l.out_max);
  return l;
}

Gemma4VisionTower::Batch Gemma4VisionTower::make_batch(std::span<const ImageInput* const> images) {
  std::vector<int> lengths;
  for (const ImageInput* im : images) lengths.push_back(int(im->pixels.dim(0)));
  return {make_image_batch(be_, lengths), rope_positions(be_, images, config_.num_heads),
          rope_positions(be_, images, config_.num_kv_heads)};
}

// 2·(pixels − 0.5) · W_in + (x row + y row of the position table).
Tensor Gemma4VisionTower::embed_patches(std::span<const ImageInput* const> images) {
  const int64_t width = 3 * int64_t(config_.patch_size) * config_.patch_size;
  int64_t N = 0;
  for (const ImageInput* im : images) N += im->pixels.dim(0);
  Tensor x = Tensor::empty_host(DType::F32, {N, width});
  float* out = x.ptr<float>();
  std::vector<int32_t> xs, ys;
  for (const ImageInput* im : images) {
    const float* px = im->pixels.ptr<float>();
    for (int64_t i = 0; i < im->pixels.numel(); i++) *out++ = 2.f * (px[i] - 0.5f);
    for (size_t n = 0; 2 * n < im->position_ids.size(); n++) {
      xs.push_back(im->position_ids[2 * n]);
      ys.push_back(im->position_ids[2 * n + 1]);
    }
  }
  Tensor h = linear(be_, be_.upload(x, be_.act_dtype()), patch_);
  Tensor pe = embedding(be_, pos_x_, upload_i32(be_, xs), 1.f);
  be_.add(pe, pe, embedding(be_, pos_y_, upload_i32(be_, ys), 1.f));
  be_.add(h, h, pe);
  return h;
}

Tensor Gemma4VisionTower::attention(const Layer& l, const Tensor& x, const Batch& batch) {
  const int64_t N = x.dim(0), H = config_.num_heads, Hkv = config_.num_kv_heads,
                Dh = config_.head_dim;
  auto project = [&](const ClippedLinear& proj, const RmsNorm& norm, int64_t heads,
                     const StepTensors* rope) {
    Tensor t = clipped_linear(be_, x, proj);
    Tensor rows = t.reshape({N * heads, Dh});
    rms_norm_in_place(be_, rows, norm);
    if (rope) {
      Tensor halves = t.reshape({N * heads * 2, 1, Dh / 2});
      be_.rope(halves, *rope, rope_);
    }
    return t.reshape({N, heads, Dh});
  };
  Tensor q = project(l.q, l.q_norm, H, &batch.q_rope);
  Tensor k = project(l.k, l.k_norm, Hkv, &batch.k_rope);
  Tensor v = project(l.v, l.v_norm, Hkv, nullptr);
  Tensor attn = image_attention(be_, batch.images, q, k, v, 1.f);
  return clipped_linear(be_, attn.reshape({N, H * Dh}), l.o);
}

void Gemma4VisionTower::layer_forward(const Layer& l, Tensor& h, const Batch& batch) {
  Tensor attn = attention(l, rms_norm(be_, h, l.input_norm), batch);
  rms_norm_in_place(be_, attn, l.post_attn_norm);
  be_.add(h, h, attn);
  Tensor n = rms_norm(be_, h, l.pre_ffn_norm);
  Tensor gate = clipped_linear(be_, n, l.gate), up = clipped_linear(be_, n, l.up);
  Tensor act = be_.alloc(be_.act_dtype(), gate.shape);
  be_.act_mul(act, gate, up, config_.act);
  Tensor mlp = clipped_linear(be_, act, l.down);
  rms_norm_in_place(be_, mlp, l.post_ffn_norm);
  be_.add(h, h, mlp);
}

// Each k×k cell's patches summed in patch order, / k², × √D, then standardized.
Tensor Gemma4VisionTower::pool(const Tensor& h, std::span<const ImageInput* const> images) {
  const int k = config_.pooling_kernel_size;
  std::vector<std::vector<int32_t>> index(size_t(k) * k);
  int32_t offset = 0;
  int64_t M = 0;
  for (const ImageInput* im : images) {
    const int64_t n = im->pixels.dim(0);
    int32_t max_x = 0;
    for (int64_t i = 0; i < n; i++) max_x = std::max(max_x, im->position_ids[size_t(2 * i)]);
    const int32_t per_row = (max_x + 1) / k;
    std::vector<std::vector<int32_t>> cells(size_t(im->num_soft_tokens));
    for (int64_t i = 0; i < n; i++) {
      const int32_t x = im->position_ids[size_t(2 * i)], y = im->position_ids[size_t(2 * i + 1)];
      cells.at(size_t(x / k + per_row * (y / k))).push_back(offset + int32_t(i));
    }
    for (const auto& cell : cells) {
      TANDEM_CHECK(int(cell.size()) == k * k, "gemma4 vision: a cell of {} patches", cell.size());
      for (size_t j = 0; j < cell.size(); j++) index[j].push_back(cell[j]);
    }
    offset += int32_t(n);
    M += im->num_soft_tokens;
  }
  Tensor pooled = sum_rows(be_, h, index);
  be_.scale(pooled, 1.f / float(k * k));
  be_.scale(pooled, float(std::sqrt(double(config_.hidden_size))));
  if (config_.standardize) {
    be_.sub(pooled, pooled,
            embedding(be_, std_bias_, upload_i32(be_, std::vector<int32_t>(size_t(M), 0)), 1.f));
    be_.mul(pooled, pooled, std_scale_);
  }
  return pooled;
}

Tensor Gemma4VisionTower::encode(std::span<const ImageInput* const> images) {
  TANDEM_CHECK(!images.empty(), "gemma4 vision: no images to encode");
  const Batch batch = make_batch(images);
  Tensor h = embed_patches(images);
  for (const Layer& l : layers_) layer_forward(l, h, batch);
  Tensor soft = pool(h, images);
  rms_norm_in_place(be_, soft, embed_norm_);
  return linear(be_, soft, embed_proj_);
}

}  // namespace tandem
