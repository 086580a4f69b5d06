// The FP8 half of WeightLoader::load_linear: an FP8 checkpoint's weights with their scales,
// or a 16-bit checkpoint's projections quantized per channel while loading; and a MoE
// block's FP8 experts, each expert fused as below and then stacked (linear.h).
//
// Fused projections (q|k|v, gate|up) are concatenated shards, each with its own scales:
//   - per-tensor shards become one per-channel vector (each shard's scale repeated over
//     its rows): the stored bytes are kept exactly, where requantizing to one scale
//     would round every weight again; the per-channel kernels cost the same;
//   - per-channel scales are concatenated;
//   - block scales are concatenated by block rows when every shard but the last has a
//     whole number of blocks; otherwise (a shard ending mid-block, as in models whose
//     k|v heads are narrower than a block) every row gets its own copy of its block's
//     scales, i.e. blocks of 1 × block_k, so no block straddles two shards;
//   - static input scales: the largest of the shards' (as vLLM does), since the fused
//     product quantizes x once.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "loader/fp8_quantize.h"
#include "model/weight_map.h"

namespace tandem {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A host f32 copy of any float tensor.
Tensor host_f32(const Tensor& t) {
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  convert_to_f32(t.data, t.dtype, out.ptr<float>(), size_t(t.numel()));
  return out;
}

// One shard's FP8 weight and f32 scales, as stored.
struct Shard {
  std::string name;
  Tensor weight;  // F8E4M3 [rows, K]
  Tensor scale;   // f32: [1], [rows] or [⌈rows/bn⌉, ⌈K/bk⌉]
  float input_scale = 0.f;
};

bool is_float16(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

}  // namespace

bool WeightLoader::loads_as_fp8(const WeightRule& rule, int layer) const {
  const QuantScheme& q = checkpoint_.quant();
  if (!q.fp8()) return false;
  const bool stacked = rule.sources[0].find("{e}") != std::string::npos;
  const std::string first = expand_name(rule.sources[0], layer, stacked ? 0 : -1);
  if (!checkpoint_.has(first)) return false;  // optional and absent, or an error in read()
  const DType dtype = checkpoint_.get(first).dtype;
  if (q.source == QuantScheme::Source::Checkpoint) return dtype == DType::F8E4M3;
  return is_float16(dtype) &&
         std::all_of(rule.sources.begin(), rule.sources.end(),
                     [&](const std::string& s) {
                       return quantizable_weight_name(expand_name(s, layer, stacked ? 0 : -1));
                     });
}

Linear WeightLoader::load_fp8_linear(const WeightRule& rule, int layer, Shape expected) {
  if (backend_.weight_dtype(DType::F8E4M3) != DType::F8E4M3)
    fail("{}: the {} backend has no FP8 linears", checkpoint_.dir().string(), backend_.name());
  Fp8Host h = read_fp8(rule, layer, -1, expected);
  h.quant.weight_scale = backend_.upload(h.quant.weight_scale, DType::F32);
  if (h.quant.input_scale.defined())
    h.quant.input_scale = backend_.upload(h.quant.input_scale, DType::F32);
  Linear l;
  l.weight = upload(h.weight);
  l.quant = std::move(h.quant);
  return l;
}

Linear WeightLoader::load_experts(const std::string& name, int layer, Shape expected) {
  const WeightRule* rule = find(name);
  if (!rule || !loads_as_fp8(*rule, layer)) return Linear{.weight = load(name, layer, expected)};
  if (slicer_)
    fail("{}: '{}' holds FP8 MoE experts, which tensor parallelism does not split yet",
         checkpoint_.dir().string(), expand_name(name, layer));
  const std::string dir = checkpoint_.dir().string(), label = expand_name(name, layer);
  if (!backend_.fp8_experts())
    fail("{}: '{}' holds FP8 MoE experts, which the {} backend does not run (the cpu and "
         "cuda backends do)", dir, label, backend_.name());
  const int64_t E = expected[0], N = expected[1], K = expected[2];
  std::vector<Fp8Host> experts;
  for (int64_t e = 0; e < E; e++) experts.push_back(read_fp8(*rule, layer, int(e), {N, K}));
  // Every expert has the same shards, so the same granularity and scale shapes.
  const LinearQuant& q0 = experts[0].quant;
  auto stack = [&](auto member) {
    const Tensor& first = experts[0].quant.*member;
    Shape s;
    s.ndim = first.ndim() + 1;
    s.dims[0] = E;
    for (int i = 0; i < first.ndim(); i++) s.dims[i + 1] = first.dim(i);
    Tensor out = Tensor::empty_host(DType::F32, s);
    for (int64_t e = 0; e < E; e++) {
      const Tensor& t = experts[size_t(e)].quant.*member;
      TANDEM_CHECK(t.shape == first.shape && experts[size_t(e)].quant.granularity == q0.granularity,
                   "{}: expert {}'s scales differ in shape from expert 0's", label, e);
      std::memcpy(out.ptr<float>() + e * first.numel(), t.data, t.nbytes());
    }
    return backend_.upload(out, DType::F32);
  };
  Linear l;
  l.quant = q0;
  l.quant->weight_scale = stack(&LinearQuant::weight_scale);
  if (q0.input_scale.defined()) l.quant->input_scale = stack(&LinearQuant::input_scale);
  Tensor weight = Tensor::empty_host(DType::F8E4M3, expected);
  for (int64_t e = 0; e < E; e++)
    std::memcpy(weight.ptr<uint8_t>() + e * N * K, experts[size_t(e)].weight.data, size_t(N * K));
  l.weight = upload(weight);
  return l;
}

WeightLoader::Fp8Host WeightLoader::read_fp8(const WeightRule& rule, int layer, int expert,
                                             Shape expected) {
  const QuantScheme& q = checkpoint_.quant();
  const std::string dir = checkpoint_.dir().string(), label = expand_name(rule.name, layer);
  const int64_t K = expected[1];
  const int bn = q.block_n, bk = q.block_k;
  std::vector<Shard> shards;
  for (const std::string& pattern : rule.sources) {
    Shard s{.name = expand_name(pattern, layer, expert)};
    const Tensor stored = checkpoint_.get(s.name);
    if (stored.ndim() != 2 || stored.cols() != K)
      fail("{}: '{}' has shape {}, want [rows, {}]", dir, s.name, stored.shape.str(), K);
    if (q.source == QuantScheme::Source::Online) {
      Fp8Rows r = quantize_fp8_per_channel(stored);
      s.weight = r.weight;
      s.scale = host_f32(r.scale).reshape({stored.rows()});
    } else {
      if (stored.dtype != DType::F8E4M3)
        fail("{}: '{}' is {} but the other shards of '{}' are FP8", dir, s.name,
             dtype_name(stored.dtype), label);
      s.weight = stored;
      const bool inv = q.weights == Fp8Weights::Block && q.method == "fp8";
      const std::string scale_name = scale_tensor_name(s.name, inv ? "weight_scale_inv" : "weight_scale");
      s.scale = host_f32(checkpoint_.get(scale_name));
      const int64_t rows = stored.rows();
      const int64_t want = q.weights == Fp8Weights::PerTensor    ? 1
                           : q.weights == Fp8Weights::PerChannel ? rows
                                                                 : ceil_div(rows, bn) * ceil_div(K, bk);
      if (s.scale.numel() != want)
        fail("{}: '{}' has shape {}; the {} scheme wants {} values for weight {}", dir, scale_name,
             s.scale.shape.str(), q.describe(""), want, stored.shape.str());
      if (q.inputs == Fp8Inputs::Static) {
        const std::string in_name = scale_tensor_name(s.name, "input_scale");
        const Tensor in = host_f32(checkpoint_.get(in_name));
        if (in.numel() != 1) fail("{}: '{}' has shape {}, want [1]", dir, in_name, in.shape.str());
        s.input_scale = in.ptr<float>()[0];
      }
    }
    shards.push_back(std::move(s));
  }

  // The fused weight.
  int64_t N = 0;
  for (auto& s : shards) N += s.weight.rows();
  if (!(Shape{N, K} == expected))
    fail("{}: weight '{}' has shape [{}, {}] but the config implies {}", dir, label, N, K,
         expected.str());
  Tensor weight = Tensor::empty_host(DType::F8E4M3, {N, K});
  int64_t row = 0;
  for (auto& s : shards) {
    std::memcpy(weight.ptr<uint8_t>() + row * K, s.weight.data, s.weight.nbytes());
    row += s.weight.rows();
  }

  // The fused scales (the rules in the file comment).
  LinearQuant quant;
  Tensor scale;
  const bool block = q.weights == Fp8Weights::Block && q.source == QuantScheme::Source::Checkpoint;
  if (!block && (q.weights == Fp8Weights::PerTensor && shards.size() == 1)) {
    quant.granularity = ScaleGranularity::PerTensor;
    scale = shards[0].scale.reshape({1});
  } else if (!block) {
    quant.granularity = ScaleGranularity::PerChannel;
    scale = Tensor::empty_host(DType::F32, {N});
    float* dst = scale.ptr<float>();
    for (auto& s : shards) {
      const int64_t rows = s.weight.rows();
      for (int64_t r = 0; r < rows; r++) *dst++ = s.scale.numel() == 1 ? s.scale.ptr<float>()[0] : s.scale.ptr<float>()[r];
    }
  } else {
    quant.granularity = ScaleGranularity::Block;
    const int64_t KB = ceil_div(K, bk);
    bool aligned = true;
    for (size_t i = 0; i + 1 < shards.size(); i++) aligned &= shards[i].weight.rows() % bn == 0;
    quant.block_n = aligned ? bn : 1;
    quant.block_k = bk;
    scale = Tensor::empty_host(DType::F32, {aligned ? ceil_div(N, bn) : N, KB});
    float* dst = scale.ptr<float>();
    for (auto& s : shards) {
      const float* src = s.scale.ptr<float>();
      if (aligned) {
        std::memcpy(dst, src, size_t(s.scale.numel()) * 4);
        dst += s.scale.numel();
      } else {
        for (int64_t r = 0; r < s.weight.rows(); r++, dst += KB)
          std::memcpy(dst, src + (r / bn) * KB, size_t(KB) * 4);
      }
    }
  }
  quant.weight_scale = scale;
  if (q.inputs == Fp8Inputs::Static) {
    quant.input = InputScaling::Static;
    quant.input_scale = Tensor::empty_host(DType::F32, {1});
    float m = 0.f;
    for (auto& s : shards) m = std::max(m, s.input_scale);
    quant.input_scale.ptr<float>()[0] = m;
  } else {
    quant.input = InputScaling::Dynamic;
  }
  return {weight, std::move(quant)};
}

}  // namespace tandem
