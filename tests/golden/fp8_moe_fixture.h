// FP8 MoE checkpoints written from the MoE oracle models (mixtral, qwen3_moe) for the golden
// tests: the experts quantized into each FP8 layout the loader reads, every other tensor
// kept 16-bit (tests/golden/fp8_moe_test.cpp on the CPU, cuda_fp8_gate_test.cpp against the
// CPU twin on CUDA).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "loader/checkpoint.h"
#include "loader/quant_scheme.h"
#include "loader/safetensors_writer.h"
#include "model/config.h"
#include "model/model.h"
#include "model/tp_slices.h"
#include "model/weight_map.h"

namespace tandem::test::fp8_moe {

using json = nlohmann::json;

enum class Layout {
  PerTensor,        // "fp8", dynamic inputs: weight_scale [1] per tensor
  PerTensorStatic,  // the same with activation_scheme static: input_scale [1] per tensor
  ChannelOfTensor,  // compressed-tensors channel: the per-tensor scale repeated per row
  BlockOfRow,       // "fp8" block [1, 4096]: the per-tensor scale per row, one block wide
  Block,            // "fp8" block [16, 32], each block quantized by its own amax
};

inline json quantization_config(Layout l) {
  switch (l) {
    case Layout::PerTensor:
      return {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}};
    case Layout::PerTensorStatic:
      return {{"quant_method", "fp8"}, {"activation_scheme", "static"}};
    case Layout::BlockOfRow:
      return {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {1, 4096}}};
    case Layout::Block:
      return {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {16, 32}}};
    case Layout::ChannelOfTensor:
      break;
  }
  const json fp8 = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}};
  json weights = fp8, inputs = fp8;
  weights["strategy"] = "channel";
  weights["dynamic"] = false;
  inputs["strategy"] = "token";
  inputs["dynamic"] = true;
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights},
                                          {"input_activations", inputs}}}}}};
}

// e4m3(w / s) for every element of rows [r0, r1) and columns [c0, c1) of w [N, K].
inline void quantize_block(uint8_t* q, const float* w, int64_t K, int64_t r0, int64_t r1, int64_t c0,
                    int64_t c1, float s) {
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < c1; c++) q[r * K + c] = f32_to_f8e4m3(w[r * K + c] / s);
}

inline float amax_scale(const float* w, int64_t K, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  float m = 0.f;
  for (int64_t r = r0; r < r1; r++)
    for (int64_t c = c0; c < c1; c++) m = std::max(m, std::fabs(w[r * K + c]));
  return std::max(m, 1e-12f) / 448.f;
}

inline Tensor f32_tensor(Shape shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty_host(DType::F32, shape);
  std::copy(v.begin(), v.end(), t.ptr<float>());
  return t;
}

// The expert index in "…experts.<e>.…", or -1.
inline int expert_of(const std::string& name, std::string* before, std::string* after) {
  static const std::regex re(R"(^(.*\.experts\.)(\d+)(\..*)$)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return -1;
  *before = m[1];
  *after = m[3];
  return std::stoi(m[2]);
}

// "…experts.<e>" + this is an up projection (Qwen3-MoE's up_proj, Mixtral's w3).
inline bool is_up(const std::string& after) { return after.starts_with(".up_proj") || after.starts_with(".w3."); }

inline bool is_router(const std::string& name) {
  return name.ends_with("mlp.gate.weight") || name.ends_with("block_sparse_moe.gate.weight");
}

// `src`'s model with its experts in FP8 (`layout`), expert e renamed perm[e] (and the
// routers' rows moved to match) when `perm` is given.
inline std::filesystem::path write_fp8_moe(const std::filesystem::path& src, const std::filesystem::path& dst, Layout layout,
                       const std::vector<int>& perm = {}) {
  std::filesystem::create_directories(dst);
  for (auto& f : std::filesystem::directory_iterator(src))
    if (f.path().extension() != ".safetensors" && f.path().filename() != "config.json")
      std::filesystem::copy_file(f.path(), dst / f.path().filename(), std::filesystem::copy_options::overwrite_existing);
  json config = json::parse(std::ifstream(src / "config.json"));
  config["quantization_config"] = quantization_config(layout);
  std::ofstream(dst / "config.json") << config.dump(2);

  const Checkpoint ck = Checkpoint::open(src);
  SafetensorsWriter w;
  for (const std::string& name : ck.names()) {
    if (ck.file_of(name).path().filename() != "model.safetensors") continue;
    Tensor t = ck.get(name);
    std::vector<float> v(size_t(t.numel()));
    convert_to_f32(t.data, t.dtype, v.data(), v.size());
    std::string before, after;
    const int e = expert_of(name, &before, &after);
    if (e < 0) {
      if (is_router(name) && !perm.empty()) {
        std::vector<float> moved(v.size());
        const int64_t D = t.cols();
        for (int64_t r = 0; r < t.rows(); r++)
          std::copy_n(v.begin() + r * D, D, moved.begin() + perm[size_t(r)] * D);
        v = moved;
      }
      w.add(name, f32_tensor(t.shape, v));
      continue;
    }
    const std::string out = before + std::to_string(perm.empty() ? e : perm[size_t(e)]) + after;
    const int64_t N = t.rows(), K = t.cols();
    Tensor q = Tensor::empty_host(DType::F8E4M3, {N, K});
    uint8_t* qp = q.ptr<uint8_t>();
    const std::string base = out.substr(0, out.size() - std::string("weight").size());
    if (layout == Layout::Block) {
      const int64_t bn = 16, bk = 32, NB = (N + bn - 1) / bn, KB = (K + bk - 1) / bk;
      std::vector<float> s(size_t(NB * KB));
      for (int64_t i = 0; i < NB; i++)
        for (int64_t j = 0; j < KB; j++) {
          const int64_t r0 = i * bn, r1 = std::min(N, r0 + bn), c0 = j * bk, c1 = std::min(K, c0 + bk);
          s[size_t(i * KB + j)] = amax_scale(v.data(), K, r0, r1, c0, c1);
          quantize_block(qp, v.data(), K, r0, r1, c0, c1, s[size_t(i * KB + j)]);
        }
      w.add(base + "weight_scale_inv", f32_tensor({NB, KB}, s));
    } else {
      const float s = amax_scale(v.data(), K, 0, N, 0, K);
      quantize_block(qp, v.data(), K, 0, N, 0, K, s);
      if (layout == Layout::ChannelOfTensor)
        w.add(base + "weight_scale", f32_tensor({N, 1}, std::vector<float>(size_t(N), s)));
      else if (layout == Layout::BlockOfRow)
        w.add(base + "weight_scale_inv", f32_tensor({N, 1}, std::vector<float>(size_t(N), s)));
      else
        w.add(base + "weight_scale", f32_tensor({1}, {s}));
      // A static input scale that differs between experts and between gate and up (the
      // loader takes the larger of a fused projection's shards).
      if (layout == Layout::PerTensorStatic)
        w.add(base + "input_scale", f32_tensor({1}, {0.01f * (1.f + 0.25f * float(e % 3) +
                                                              0.5f * float(is_up(after)))}));
    }
    w.add(out, q);
  }
  w.write(dst / "model.safetensors");
  return dst;
}

// One layer's stacked experts of the MoE oracle folder `dir` ("mixtral" or "qwen3_moe"
// tensor names, as model/arch/moe.cpp maps them), loaded as load_model would under `online`
// and, with `tp`, rank tp.rank's slice of them.
struct LayerExperts {
  Linear gate_up;  // [E, 2·Fe / N, D]
  Linear down;     // [E, D, Fe / N]
};

inline LayerExperts load_layer_experts(const std::filesystem::path& dir, bool mixtral, Backend& be,
                                       const std::optional<QuantScheme>& online, int layer,
                                       TpShard tp = {}) {
  const std::string M = mixtral ? "model.layers.{i}.block_sparse_moe.experts.{e}."
                                : "model.layers.{i}.mlp.experts.{e}.";
  const WeightMap map = {
      {"layers.{i}.experts_gate_up",
       {M + (mixtral ? "w1.weight" : "gate_proj.weight"),
        M + (mixtral ? "w3.weight" : "up_proj.weight")}},
      {"layers.{i}.experts_down", {M + (mixtral ? "w2.weight" : "down_proj.weight")}}};
  const ModelConfig c = ModelConfig::load(dir);
  Checkpoint ck = Checkpoint::open(dir);
  ck.set_quant(model_quant_scheme(c, online));
  WeightLoader w(ck, be, map, c.num_experts);
  if (tp.size > 1) w.set_slicer(decoder_slicer(c, tp), tp.rank);
  const int64_t E = c.num_experts, D = c.hidden_size, Fe = c.moe_intermediate_size / tp.size;
  return {w.load_experts("layers.{i}.experts_gate_up", layer, {E, 2 * Fe, D}),
          w.load_experts("layers.{i}.experts_down", layer, {E, D, Fe})};
}

}  // namespace tandem::test::fp8_moe
