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

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

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

bool is_float16(DType t) {
  return t == DType::BF16 || t == DType::F16 || t == DType::F32;
}

using Range = WeightSlice::Range;

// The rows of a shard [rows, K] at `fused_row` of its fused weight that `slice` keeps: all of
// them, or where a Rows slice's ranges cross it (model/tp_slices.h).
std::vector<Range> shard_rows(const WeightSlice& slice, int64_t fused_row, int64_t rows) {
  if (slice.kind != WeightSlice::Kind::Rows) return {{0, rows}};
  std::vector<Range> out;
  for (const Range& r : slice.rows) {
    const int64_t lo = std::max(r.begin, fused_row),
                  hi = std::min(r.begin + r.count, fused_row + rows);
    if (lo < hi) out.push_back({lo - fused_row, hi - lo});
  }
  return out;
}

// Rows `r` of `t` [R, C] and, under a Columns slice, the slice's columns (a copy).
Tensor part_of(const Tensor& t, Range r, const WeightSlice& slice, const std::string& label) {
  const Tensor rows = t.slice_rows(r.begin, r.count);
  if (slice.kind != WeightSlice::Kind::Columns) return rows;
  return slice_parts({rows}, {.kind = WeightSlice::Kind::Columns, .columns = slice.columns}, label,
                     [](const std::vector<Tensor>& p) { return p[0]; });
}

// A [bn, bk] block-scaled shard [rows, K] keeps its scales only when the slice cuts it
// between blocks: its rows `r` and the slice's columns must start on a block and end on
// one (or at the shard's end). Otherwise an error naming the tensor, the blocks and N.
void check_block_cut(const std::string& dir, const std::string& name, int64_t rows, int64_t K,
                     Range r, const WeightSlice& slice, int bn, int bk) {
  auto inside = [](Range c, int64_t block, int64_t whole) {
    return c.begin % block != 0 || (c.count % block != 0 && c.begin + c.count != whole);
  };
  const bool cut_cols = slice.kind == WeightSlice::Kind::Columns && inside(slice.columns, bk, K);
  if (!cut_cols && !inside(r, bn, rows)) return;
  const Range bad = cut_cols ? slice.columns : r;
  fail(
      "{}: '{}' [{}, {}] has {}x{} scale blocks, and --tensor-parallel-size {} would cut one: "
      "this rank's {} [{}, {}) do not start and end on a block (use a smaller N)",
      dir, name, rows, K, bn, bk, slice.ranks, cut_cols ? "columns" : "rows", bad.begin,
      bad.begin + bad.count);
}

// The scales of part_of(weight) for a stored `scale` of `q`'s granularity: per-tensor whole,
// per-channel its rows, block scales their whole blocks' rows and columns.
Tensor scale_part(const Tensor& scale, const QuantScheme& q, int64_t rows, int64_t K, Range r,
                  const WeightSlice& slice, const std::string& label) {
  if (q.weights == Fp8Weights::PerTensor || scale.numel() == 1) return scale;
  if (q.weights == Fp8Weights::PerChannel)
    return scale.reshape({rows}).slice_rows(r.begin, r.count);
  const int64_t bn = q.block_n, bk = q.block_k;
  const Tensor blocks = scale.reshape({ceil_div(rows, bn), ceil_div(K, bk)});
  Range block_rows{r.begin / bn, ceil_div(r.begin + r.count, bn) - r.begin / bn};
  WeightSlice cut = slice;
  if (slice.kind == WeightSlice::Kind::Columns) {
    const Range c = slice.columns;
    cut.columns = {c.begin / bk, ceil_div(c.begin + c.count, bk) - c.begin / bk};
  }
  return part_of(blocks, block_rows, cut, label);
}

// Rows `r` (and the slice's columns) of stored shard `name`: quantized per channel from 16
// bits (online: each rank quantizes only its part), or its FP8 bytes with their scales.
Shard read_shard(const Checkpoint& ck, const std::string& name, const Tensor& stored, Range r,
                 const WeightSlice& slice, const std::string& label) {
  const QuantScheme& q = ck.quant();
  const std::string dir = ck.dir().string();
  const int64_t rows = stored.rows(), K = stored.cols();
  Shard s{.name = name};
  const Tensor part = part_of(stored, r, slice, name);
  if (q.source == QuantScheme::Source::Online) {
    Fp8Rows quantized = quantize_fp8_per_channel(part);
    s.weight = quantized.weight;
    s.scale = host_f32(quantized.scale).reshape({part.rows()});
    return s;
  }
  if (stored.dtype != DType::F8E4M3)
    fail("{}: '{}' is {} but the other shards of '{}' are FP8", dir, name, dtype_name(stored.dtype),
         label);
  s.weight = part;
  const bool inv = q.weights == Fp8Weights::Block && q.method == "fp8";
  const std::string scale_name = scale_tensor_name(name, inv ? "weight_scale_inv" : "weight_scale");
  const Tensor scale = host_f32(ck.get(scale_name));
  check_fp8_scales(dir, scale_name, scale.ptr<float>(), scale.numel());
  const int64_t want = q.weights == Fp8Weights::PerTensor ? 1
                       : q.weights == Fp8Weights::PerChannel
                           ? rows
                           : ceil_div(rows, q.block_n) * ceil_div(K, q.block_k);
  if (scale.numel() != want)
    fail("{}: '{}' has shape {}; the {} scheme wants {} values for weight {}", dir, scale_name,
         scale.shape.str(), q.describe(""), want, stored.shape.str());
  if (q.weights == Fp8Weights::Block && slice.kind != WeightSlice::Kind::Whole)
    check_block_cut(dir, name, rows, K, r, slice, q.block_n, q.block_k);
  s.scale = scale_part(scale, q, rows, K, r, slice, scale_name);
  if (q.inputs == Fp8Inputs::Static) {
    const std::string in_name = scale_tensor_name(name, "input_scale");
    const Tensor in = host_f32(ck.get(in_name));
    if (in.numel() != 1) fail("{}: '{}' has shape {}, want [1]", dir, in_name, in.shape.str());
    check_fp8_scales(dir, in_name, in.ptr<float>(), 1, /*positive=*/true);
    s.input_scale = in.ptr<float>()[0];
  }
  return s;
}

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
         std::all_of(rule.sources.begin(), rule.sources.end(), [&](const std::string& s) {
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
  const std::string dir = checkpoint_.dir().string(), label = expand_name(name, layer);
  const bool online = checkpoint_.quant().source == QuantScheme::Source::Online;
  const bool fp8 = rule && loads_as_fp8(*rule, layer);
  if (fp8 && !backend_.fp8_experts() && !online)
    fail(
        "{}: '{}' holds FP8 MoE experts, which the {} backend does not run (the cpu and "
        "cuda backends do)",
        dir, label, backend_.name());
  if (!fp8 || !backend_.fp8_experts()) {
    // 16-bit experts; under --quantization fp8 on a backend without FP8 experts the dense
    // projections are still quantized, the experts not (said once, by rank 0).
    Linear l{.weight = load(name, layer, expected)};
    std::string format(dtype_name(l.weight.dtype));
    if (fp8) {
      format += fmt::format(" (the {} backend runs no FP8 MoE experts)", backend_.name());
      if (experts_format_.empty() && tp_rank_ == 0)
        fmt::print(stderr, "--quantization fp8: MoE experts stay {}\n", format);
    }
    if (experts_format_.empty()) experts_format_ = format;
    return l;
  }
  if (experts_format_.empty()) experts_format_ = "fp8_e4m3";
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

bool WeightLoader::quantizes_stacked_experts(const std::string& name, DType stored) {
  const QuantScheme& q = checkpoint_.quant();
  const bool runs_fp8 =
      backend_.fp8_experts() && backend_.weight_dtype(DType::F8E4M3) == DType::F8E4M3;
  if (stored == DType::F8E4M3) {
    const std::string dir = checkpoint_.dir().string();
    if (!runs_fp8)
      fail(
          "{}: '{}' holds FP8 MoE experts, which the {} backend does not run (the cpu and "
          "cuda backends do)",
          dir, name, backend_.name());
    if (q.weights != Fp8Weights::PerChannel || q.inputs != Fp8Inputs::Dynamic)
      fail(
          "{}: stacked FP8 experts '{}' want per-channel weights with dynamic inputs (as "
          "`tandem quantize` writes them), not the checkpoint's {}",
          dir, name, q.describe(""));
    if (experts_format_.empty()) experts_format_ = "fp8_e4m3";
    return true;
  }
  const bool online = q.fp8() && q.source == QuantScheme::Source::Online && is_float16(stored);
  const bool fp8 = online && runs_fp8;
  if (!experts_format_.empty()) return fp8;
  std::string format(dtype_name(backend_.weight_dtype(stored)));
  if (fp8) {
    format = "fp8_e4m3";
  } else if (online) {
    format += fmt::format(" (the {} backend runs no FP8 MoE experts)", backend_.name());
    if (tp_rank_ == 0) fmt::print(stderr, "--quantization fp8: MoE experts stay {}\n", format);
  } else if (q.fp8()) {  // an FP8 checkpoint holding them 16-bit (an older `tandem quantize`)
    format += " (the checkpoint holds its stacked experts so)";
  }
  experts_format_ = format;
  return fp8;
}

Linear WeightLoader::quantize_stacked_experts(const Tensor& host) {
  TANDEM_CHECK(host.ndim() == 3 && is_float16(host.dtype),
               "quantize_stacked_experts: want a float [E, N, K] tensor, got {} {}",
               dtype_name(host.dtype), host.shape.str());
  const int64_t E = host.dim(0), N = host.dim(1), K = host.dim(2);
  // Each row of [E·N, K] is one output channel of one expert.
  const Fp8Rows q = quantize_fp8_per_channel(host.reshape({E * N, K}));
  report_progress(int64_t(host.nbytes()));
  return stacked_fp8_experts(q.weight.reshape({E, N, K}), host_f32(q.scale).reshape({E, N}));
}

Linear WeightLoader::stacked_fp8_experts(const Tensor& weight, const Tensor& scale) {
  TANDEM_CHECK(weight.ndim() == 3 && weight.dtype == DType::F8E4M3 && scale.dtype == DType::F32 &&
                   scale.shape == (Shape{weight.dim(0), weight.dim(1)}),
               "stacked_fp8_experts: want e4m3 [E, N, K] and f32 [E, N], got {} {} and {} {}",
               dtype_name(weight.dtype), weight.shape.str(), dtype_name(scale.dtype),
               scale.shape.str());
  Linear l;
  l.weight = backend_.upload(weight, DType::F8E4M3);
  LinearQuant quant;
  quant.granularity = ScaleGranularity::PerChannel;
  quant.input = InputScaling::Dynamic;
  quant.weight_scale = backend_.upload(scale, DType::F32);
  l.quant = std::move(quant);
  return l;
}

WeightLoader::Fp8Host WeightLoader::read_fp8(const WeightRule& rule, int layer, int expert,
                                             Shape expected) {
  const QuantScheme& q = checkpoint_.quant();
  const std::string dir = checkpoint_.dir().string(), label = expand_name(rule.name, layer);
  const int64_t K = expected[1];
  const int bn = q.block_n, bk = q.block_k;
  // Under tensor parallelism each shard contributes this rank's rows of it (or all its rows
  // and the slice's columns), with their scales (model/tp_slices.h).
  const WeightSlice slice = slicer_ ? slicer_(rule.name, layer) : WeightSlice{};
  std::vector<Shard> shards;
  int64_t fused_row = 0;
  for (const std::string& pattern : rule.sources) {
    const std::string name = expand_name(pattern, layer, expert);
    const Tensor stored = checkpoint_.get(name);
    const int64_t rows = stored.ndim() == 2 ? stored.rows() : 0,
                  full_k = stored.ndim() == 2 ? stored.cols() : 0;
    if (stored.ndim() != 2 || (slice.kind != WeightSlice::Kind::Columns && full_k != K))
      fail("{}: '{}' has shape {}, want [rows, {}]", dir, name, stored.shape.str(), K);
    for (const Range& r : shard_rows(slice, fused_row, rows))
      shards.push_back(read_shard(checkpoint_, name, stored, r, slice, label));
    fused_row += rows;
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
      for (int64_t r = 0; r < rows; r++)
        *dst++ = s.scale.numel() == 1 ? s.scale.ptr<float>()[0] : s.scale.ptr<float>()[r];
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
