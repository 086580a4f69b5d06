// The CPU twin of the FP8 linears: the reference the CUDA kernels are checked against, op
// by op, and what the CPU backend serves an FP8 checkpoint (or --quantization fp8) with.
//
// The declared W8A8 arithmetic, for x [T, K] and an e4m3 weight Wq [N, K] with scales s_w:
//   x is scaled per token — per group of block_k columns for block weights, over the whole
//   row otherwise — by s_x = max(|x|, 1e-12) / 448 (Dynamic) or the checkpoint's fixed
//   input_scale (Static), and rounded to e4m3 (nearest even, saturating at ±448): xq;
//   y[t, n] = Σ_groups (Σ_k xq[t, k] · Wq[n, k]) · s_x[t, g] · s_w[n, g],
// with s_w one value, one per row n, or one per [block_n, block_k] block.
// Per-tensor and per-channel weights (one group): the GEMM kernels take Wq as stored, one
// byte a weight, widened in registers (cpu_gemm.h), and sum xq · Wq in f32 — every product
// of two e4m3 values is exact in f32, so only the summation order is the kernels' — then
// each sum is scaled by s_x · s_w in double. Block weights: an f32 GEMM of x' = xq · s_x
// against W' = Wq · s_w (folding the scales into the factors moves each term by at most
// one f32 rounding, 2^-24), W' made in registers chunk by chunk for a few rows, or expanded
// a bounded slice of rows at a time for many, never whole. The oracle fixtures agree with
// either to ~1e-6.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_gemm.h"

namespace tandem {
namespace {

struct E4m3Values {
  float v[256];
  E4m3Values() {
    for (int c = 0; c < 256; c++) v[c] = f8e4m3_to_f32(uint8_t(c));
  }
};

const float* e4m3_values() {
  static const E4m3Values table;
  return table.v;
}

// e4m3(v) for a double v: nearest even, saturating at ±448 (as f32_to_f8e4m3, on doubles).
uint8_t f64_to_f8e4m3(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  const uint8_t sign = uint8_t((bits >> 56) & 0x80);
  const double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7f;
  if (a >= 448.0) return sign | 0x7e;
  if (a < 0.015625) return sign | uint8_t(std::nearbyint(a * 512.0));
  uint64_t abs_bits = bits & 0x7fffffffffffffffull;
  abs_bits += ((uint64_t(1) << 48) - 1) + ((abs_bits >> 49) & 1);
  const int exp = int(abs_bits >> 52) - 1023;
  const uint64_t mant = (abs_bits >> 49) & 7;
  return sign | uint8_t(uint64_t(exp + 7) << 3 | mant);
}

// The columns one activation scale covers: a block's width, or the whole row.
int64_t input_group(const LinearQuant& q, int64_t K) {
  return q.granularity == ScaleGranularity::Block ? q.block_k : K;
}

// xq = the e4m3 value of x / s and s, per row and column group, x rounded to bf16 first
// when `bf16_inputs` (CpuBackend::set_fp8_inputs_bf16).   xq, x [T, K], s [T, ⌈K / group⌉]
void quantize_inputs(ThreadPool& pool, float* xq, double* s, const float* x, int64_t T, int64_t K,
                     int64_t group, const std::optional<float>& static_scale, bool bf16_inputs) {
  const float* values = e4m3_values();
  const int64_t G = (K + group - 1) / group;
  cpu::parallel_for(pool, T, K * 4, [&](int64_t begin, int64_t end) {
    std::vector<float> row(bf16_inputs ? size_t(K) : 0);
    for (int64_t t = begin; t < end; t++) {
      const float* in = x + t * K;
      if (bf16_inputs) {
        for (int64_t k = 0; k < K; k++) row[size_t(k)] = bf16_to_f32(f32_to_bf16(in[k]));
        in = row.data();
      }
      for (int64_t g = 0; g < G; g++) {
        const int64_t g0 = g * group, g1 = std::min(K, g0 + group);
        double sg = 0.0;
        if (static_scale) {
          sg = *static_scale;
        } else {
          float amax = 0.f;
          for (int64_t k = g0; k < g1; k++) amax = std::max(amax, std::fabs(in[k]));
          sg = std::max(double(amax), 1e-12) / 448.0;
        }
        s[t * G + g] = sg;
        for (int64_t k = g0; k < g1; k++) xq[t * K + k] = values[f64_to_f8e4m3(double(in[k]) / sg)];
      }
    }
  });
}

// W'[n - n0] = Wq[n] · s_w for rows [n0, n1) of a block-scaled weight.
//   dst [n1 - n0, K], w [N, K]
void expand_weight_rows(ThreadPool& pool, float* dst, const uint8_t* w, const LinearQuant& q,
                        int64_t n0, int64_t n1, int64_t K) {
  const float* values = e4m3_values();
  const float* scale = q.weight_scale.ptr<float>();
  const int64_t KB = (K + q.block_k - 1) / q.block_k;
  cpu::parallel_for(pool, n1 - n0, K, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++) {
      const int64_t n = n0 + r;
      const uint8_t* row = w + n * K;
      const float* srow = scale + (n / q.block_n) * KB;
      float* out = dst + r * K;
      for (int64_t k = 0; k < K; k++) out[k] = values[row[k]] * srow[k / q.block_k];
    }
  });
}

// x' = xq · s_x, the block path's input.   xq [T, K], s [T, ⌈K / group⌉]
void scale_inputs(float* xq, const double* s, int64_t T, int64_t K, int64_t group) {
  const int64_t G = (K + group - 1) / group;
  for (int64_t t = 0; t < T; t++)
    for (int64_t k = 0; k < K; k++)
      xq[t * K + k] = float(double(xq[t * K + k]) * s[t * G + k / group]);
}

// Block weights for fewer rows than this go through the GEMM kernels as bytes, each chunk
// scaled in registers (gemm_xwt_e4m3_blocks); for more, W' is expanded a slice at a time,
// once for every row. W' has the same bits either way, so the rows do too. llama-100m's
// 88 MB of layers in [128, 128] blocks, two threads, at 1 / 16 / 64 / 256 rows: 4.7 / 32 /
// 120 / 503 ms in registers against ~100 / 102-119 / 164 / 373 expanded.
constexpr int64_t kBlockStreamRows = 128;

void check_quant(const Linear& l, int64_t N, int64_t K) {
  const LinearQuant& q = *l.quant;
  cpu::check_tensor(l.weight, DType::F8E4M3, "linear", "w");
  cpu::check_tensor(q.weight_scale, DType::F32, "linear", "weight_scale");
  int64_t want = 1;
  if (q.granularity == ScaleGranularity::PerChannel) want = N;
  if (q.granularity == ScaleGranularity::Block) {
    TANDEM_CHECK(q.block_n > 0 && q.block_k > 0, "linear: block scales need block sizes, got {}x{}",
                 q.block_n, q.block_k);
    want = ((N + q.block_n - 1) / q.block_n) * ((K + q.block_k - 1) / q.block_k);
  }
  TANDEM_CHECK(q.weight_scale.numel() == want, "linear: weight_scale {} must have {} values for w {}",
               q.weight_scale.shape.str(), want, l.weight.shape.str());
  TANDEM_CHECK(q.input != InputScaling::None,
               "linear: the cpu backend takes FP8 weights with quantized inputs (W8A8) only");
  if (q.input == InputScaling::Static) {
    cpu::check_tensor(q.input_scale, DType::F32, "linear", "input_scale");
    TANDEM_CHECK(q.input_scale.numel() == 1 && q.input_scale.ptr<float>()[0] > 0.f,
                 "linear: input_scale must be one positive value");
  }
}

}  // namespace

void CpuBackend::linear_fp8(Tensor& out, const Tensor& x, const Linear& l) {
  const Tensor& w = l.weight;
  const LinearQuant& q = *l.quant;
  cpu::check_tensor(out, DType::F32, "linear", "out");
  cpu::check_tensor(x, DType::F32, "linear", "x");
  cpu::check_ndim(w, 2, "linear", "w");
  const int64_t T = x.rows(), K = w.dim(1), N = w.dim(0);
  check_quant(l, N, K);
  TANDEM_CHECK(x.cols() == K, "linear: x {} does not match w {} (K = {})", x.shape.str(),
               w.shape.str(), K);
  TANDEM_CHECK(out.rows() == T && out.cols() == N, "linear: out {} must be [{}, {}]",
               out.shape.str(), T, N);
  TANDEM_CHECK(out.data != x.data, "linear: out may not alias x");
  TANDEM_CHECK(K > 0, "linear: empty reduction dim in w {}", w.shape.str());
  if (T == 0) return;
  const int64_t group = input_group(q, K), G = (K + group - 1) / group;
  std::vector<float> xq(size_t(T * K));
  std::vector<double> sx(size_t(T * G));
  std::optional<float> static_scale;
  if (q.input == InputScaling::Static) static_scale = q.input_scale.ptr<float>()[0];
  quantize_inputs(*pool_, xq.data(), sx.data(), x.ptr<float>(), T, K, group, static_scale,
                  fp8_inputs_bf16_);
  float* o = out.ptr<float>();
  const float* sw = q.weight_scale.ptr<float>();
  if (q.granularity != ScaleGranularity::Block) {
    cpu::gemm_xwt(*pool_, o, xq.data(), w.data, DType::F8E4M3, T, N, K);
    const bool per_channel = q.granularity == ScaleGranularity::PerChannel;
    cpu::parallel_for(*pool_, T, N, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; t++)
        for (int64_t n = 0; n < N; n++)
          o[t * N + n] = float(double(o[t * N + n]) * sx[size_t(t)] * sw[per_channel ? n : 0]);
    });
  } else if (T < kBlockStreamRows && q.block_k % 32 == 0) {
    scale_inputs(xq.data(), sx.data(), T, K, group);
    cpu::gemm_xwt_e4m3_blocks(*pool_, o, xq.data(), w.ptr<uint8_t>(), sw, q.block_n, q.block_k,
                              T, N, K);
  } else {
    scale_inputs(xq.data(), sx.data(), T, K, group);
    // Slices of at most ~16 MB of expanded weight rows.
    const int64_t slice = std::clamp<int64_t>((int64_t(4) << 20) / K, 1, N);
    std::vector<float> wq(size_t(slice * K));
    std::vector<float> part(slice == N ? 0 : size_t(T * slice));
    for (int64_t n0 = 0; n0 < N; n0 += slice) {
      const int64_t n1 = std::min(N, n0 + slice), rows = n1 - n0;
      expand_weight_rows(*pool_, wq.data(), w.ptr<uint8_t>(), q, n0, n1, K);
      float* dst = slice == N ? o : part.data();
      cpu::gemm_xwt(*pool_, dst, xq.data(), wq.data(), DType::F32, T, rows, K);
      if (slice != N)
        for (int64_t t = 0; t < T; t++) std::copy_n(dst + t * rows, rows, o + t * N + n0);
    }
  }
  if (!l.bias.defined()) return;
  const cpu::F32Weights bias(l.bias, "linear", "bias");
  TANDEM_CHECK(l.bias.numel() == N, "linear: bias {} must have {} elements", l.bias.shape.str(), N);
  for (int64_t t = 0; t < T; t++)
    for (int64_t n = 0; n < N; n++) o[t * N + n] += bias.data()[n];
}

}  // namespace tandem
