// FP8 (e4m3) linears on CUDA (cuda_linear_fp8.h says which path takes which shape). The
// arithmetic is the CPU twin's (cpu_linear_fp8.cpp): x quantized per token (per token and
// block_k columns for block weights) or by the static input scale, e4m3 products summed
// in f32, both scales applied to each group's sum.
//
// Column-major terms for cuBLASLt, as in cuda_linear.cu: out [T, N] is C (N x T), W [N, K]
// is A (K x N, op T), xq [T, K] is B (K x T): m = N, n = T, k = K. The A scale vector has
// m = N entries (s_w per channel), the B scale vector n = T entries (s_x per token).
#include <cuda_fp8.h>

#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_linear_fp8.cuh"
#include "backend/cuda/cuda_linear_fp8.h"
#include "backend/cuda/cuda_lt_gemm.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;

// ---------------------------------------------------------------- kernels

__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }


// xq[t, k] = e4m3(x[t, k] / s[t, g]), s[t, g] = max(|x[t, g-th group]|, 1e-12) / 448, or the
// static scale when `static_scale` is set.   x [T, K] bf16, xq [T, K], scales [T, G].
// s and the quotient as in f64 (cuda::f8_quotient), as the CPU twin computes them (f32
// arithmetic broke exact midpoint ties the other way now and then: a whole e4m3 step of
// one term).
// One block per token. kVec: 8 columns per load (K and the group a multiple of 8, x and
// xq 16- and 8-byte aligned); the second pass reads the row again from L1.
template <bool kVec>
__global__ void quantize_rows_kernel(uint8_t* __restrict__ xq, float* __restrict__ scales,
                                     const bf16* __restrict__ x, int64_t K, int64_t group,
                                     int64_t num_groups, const float* __restrict__ static_scale) {
  __shared__ float scratch[32];
  cuda::pdl_launch_next();  // the weight stream after it may start filling its ring
  cuda::pdl_wait();
  const int64_t t = blockIdx.x;
  const bf16* row = x + t * K;
  constexpr int kStep = kVec ? 8 : 1;
  for (int64_t g = 0; g < num_groups; g++) {
    const int64_t k0 = g * group, k1 = min(K, k0 + group);
    double s;
    if (static_scale) {
      s = *static_scale;
    } else {
      float amax = 0.f;
      for (int64_t k = k0 + threadIdx.x * kStep; k < k1; k += blockDim.x * kStep) {
        if constexpr (kVec) {
          const uint4 v = *reinterpret_cast<const uint4*>(row + k);
          const bf16* e = reinterpret_cast<const bf16*>(&v);
#pragma unroll
          for (int i = 0; i < 8; i++) amax = fmaxf(amax, fabsf(to_float(e[i])));
        } else {
          amax = fmaxf(amax, fabsf(to_float(row[k])));
        }
      }
      s = cuda::f8_row_scale(cuda::block_max(amax, scratch));
    }
    cuda::quantize_row<kStep, kVec>(xq + t * K + k0, row + k0, k1 - k0, int(threadIdx.x),
                                    int(blockDim.x), s);
    if (threadIdx.x == 0) scales[t * num_groups + g] = float(s);
  }
}

using cuda::Fp8Call;
using cuda::WeightScales;

// Two e4m3 bytes → two floats, exactly.
__device__ __forceinline__ float2 f8x2_to_float2(uint16_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// Σ over 16 e4m3 pairs packed in two uint4 loads.
__device__ __forceinline__ float dot16(const uint4& a, const uint4& b) {
  const uint32_t wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 a0 = f8x2_to_float2(uint16_t(wa[i] & 0xffffu)), a1 = f8x2_to_float2(uint16_t(wa[i] >> 16));
    const float2 b0 = f8x2_to_float2(uint16_t(wb[i] & 0xffffu)), b1 = f8x2_to_float2(uint16_t(wb[i] >> 16));
    sum = fmaf(a0.x, b0.x, sum);
    sum = fmaf(a0.y, b0.y, sum);
    sum = fmaf(a1.x, b1.x, sum);
    sum = fmaf(a1.y, b1.y, sum);
  }
  return sum;
}

__device__ __forceinline__ float f8_to_float(uint8_t b) {
  return f8x2_to_float2(uint16_t(b)).x;
}

constexpr int kPlainWarps = 8;  // output rows per block
constexpr int kPlainRows = 2;   // tokens per block (grid.y covers the rest)

// The weight stream: out[t, n] = Σ_g s_x[t, g] · s_w(n, g) · Σ_{k∈g} xq[t, k] · wq[n, k]
// (+ bias[n]). A warp per output row n, kPlainRows tokens per block; kVec: 16 bytes per
// lane per load (K % 16 == 0, group % 16 == 0, 16-byte aligned rows), else one element.
//   out [T, N] (OutT: bf16 or f32), xq [T, K], w [N, K], x_scales [T, G]
template <bool kVec, typename OutT>
__global__ void __launch_bounds__(kPlainWarps * 32)
    fp8_stream_kernel(OutT* __restrict__ out, const uint8_t* __restrict__ xq,
                      const float* __restrict__ x_scales, const uint8_t* __restrict__ w,
                      WeightScales ws, const bf16* __restrict__ bias, int64_t T, int64_t N,
                      int64_t K, int64_t group, int64_t num_groups) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * kPlainWarps + warp;
  const int64_t t0 = int64_t(blockIdx.y) * kPlainRows;
  if (n >= N) return;
  const int rows = T - t0 < kPlainRows ? int(T - t0) : kPlainRows;
  const uint8_t* wrow = w + n * K;
  float acc[kPlainRows] = {};
  if constexpr (kVec) {
#pragma unroll 4
    for (int64_t k = int64_t(lane) * 16; k < K; k += 32 * 16) {
      const uint4 wv = *reinterpret_cast<const uint4*>(wrow + k);
      const int64_t g = k / group;
      const float sw = ws.at(n, g);
#pragma unroll
      for (int r = 0; r < kPlainRows; r++) {
        if (r >= rows) break;
        const int64_t t = t0 + r;
        const uint4 xv = *reinterpret_cast<const uint4*>(xq + t * K + k);
        acc[r] = fmaf(dot16(wv, xv), sw * x_scales[t * num_groups + g], acc[r]);
      }
    }
  } else {
    for (int64_t k = lane; k < K; k += 32) {
      const float wk = f8_to_float(wrow[k]);
      const int64_t g = k / group;
      const float sw = ws.at(n, g);
      for (int r = 0; r < rows; r++) {
        const int64_t t = t0 + r;
        acc[r] = fmaf(wk * f8_to_float(xq[t * K + k]), sw * x_scales[t * num_groups + g], acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kPlainRows; r++) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0 && r < rows) {
      if (bias) v += to_float(bias[n]);
      if constexpr (std::is_same_v<OutT, float>) out[(t0 + r) * N + n] = v;
      else out[(t0 + r) * N + n] = __float2bfloat16_rn(v);
    }
  }
}

// out[t, n] = acc[t, n] · s_x[t] · s_w(n) (+ bias[n]): the epilogue of the unscaled GEMM.
template <typename OutT>
__global__ void fp8_scale_kernel(OutT* __restrict__ out, const float* __restrict__ acc,
                                 const float* __restrict__ x_scales, WeightScales ws,
                                 const bf16* __restrict__ bias, int64_t T, int64_t N) {
  const int64_t total = T * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / N, n = i % N;
    float v = acc[i] * x_scales[t] * ws.at(n, 0);
    if (bias) v += to_float(bias[n]);
    if constexpr (std::is_same_v<OutT, float>) out[i] = v;
    else out[i] = __float2bfloat16_rn(v);
  }
}

// out[t, n] += bias[n] (bf16 out of the scaled cuBLASLt GEMM).
__global__ void fp8_add_bias_kernel(bf16* __restrict__ out, const bf16* __restrict__ bias,
                                    int64_t T, int64_t N) {
  const int64_t total = T * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(to_float(out[i]) + to_float(bias[i % N]));
}

// ---------------------------------------------------------------- cuBLASLt e4m3 GEMM

// Runs the e4m3 GEMM d [T, N] = xq · wᵀ (cuda_lt_gemm.h) in f32 or bf16, with the scales
// as OUTER_VEC_32F vectors when given (a_scale [N], b_scale [T]) or unscaled; false when
// cuBLASLt takes no algorithm for it (nothing launched).
bool run_fp8_gemm(const cuda::LtContext& ctx, int device, int64_t T, int64_t N, int64_t K,
                  bool out_f32, bool fast, const void* w, const void* xq, void* d,
                  const float* a_scale, const float* b_scale) {
  cuda::LtGemmKey key;
  key.device = device;
  key.m = N;
  key.n = T;
  key.k = K;
  key.ab_type = CUDA_R_8F_E4M3;
  key.out_type = out_f32 ? CUDA_R_32F : CUDA_R_16BF;
  key.outer_scales = a_scale != nullptr;
  key.fast_accum = fast;
  return cuda::run_lt_gemm(ctx, key, {w, xq, d, nullptr, a_scale, b_scale}, "linear fp8");
}

std::string dims(int64_t a, int64_t b) {
  return "[" + std::to_string(a) + ", " + std::to_string(b) + "]";
}

// ---------------------------------------------------------------- the paths

// x's e4m3 copy and scales [T, ⌈K / group⌉], by the quantize kernel.
Fp8Input quantize_input(CudaBackend& be, const Fp8Call& c) {
  Fp8Input xq{be.alloc(DType::F8E4M3, {c.T, c.K}),
              be.alloc(DType::F32, {c.T, cuda::ceil_div(c.K, c.group)})};
  cuda::launch_quantize_rows(be.stream(), xq.q.ptr<uint8_t>(), xq.scales.ptr<float>(),
                             c.x->ptr<bf16>(), c.T, c.K, c.group, c.static_scale);
  return xq;
}

// The kernels of a call whose x is quantized, in the order they are tried.
enum class Fp8Path {
  Wgmma,        // tandem's wgmma GEMM (cuda_gemm_fp8.h), scales and bias in its epilogue
  LtScaled,     // cuBLASLt e4m3 with OUTER_VEC_32F scales (+ a bias kernel)
  LtEpilogue,   // cuBLASLt e4m3 unscaled to f32 + the scale kernel
  PlainStream,  // fp8_stream_kernel: every layout and shape
};

// The path for a call that the weight stream does not take (cuda_linear_fp8.h says the rule
// in words). The cuBLASLt paths may still be refused at run time: then the next one runs.
Fp8Path choose_fp8_path(const Fp8Call& c, const Fp8Input& xq, Fp8GemmPath forced,
                        const cudaDeviceProp& props) {
  const bool wgmma = forced == Fp8GemmPath::Wgmma ||
                     (forced == Fp8GemmPath::Auto && fp8_wgmma_preferred(c.T, c.N, c.K));
  if (wgmma && !c.ws.block() && fp8_wgmma_fits(props, c.T, c.N, c.K, c.w->data, xq.q.data))
    return Fp8Path::Wgmma;
  const bool lt_shape = !c.ws.block() && c.K % 16 == 0 && c.N % 16 == 0 &&
                        cuda::aligned16(c.w->data) && cuda::aligned16(c.out->data);
  if (forced == Fp8GemmPath::Stream || !lt_shape || c.T <= 2) return Fp8Path::PlainStream;
  return forced != Fp8GemmPath::Epilogue && c.ws.per_channel() ? Fp8Path::LtScaled
                                                               : Fp8Path::LtEpilogue;
}

// cuBLASLt's scaled e4m3 GEMM straight into out, then the bias; false: refused.
bool launch_lt_scaled(CudaBackend& be, const cuda::LtContext& ctx, const Fp8Call& c,
                      const Fp8Input& xq, bool fast) {
  if (!run_fp8_gemm(ctx, be.device_index(), c.T, c.N, c.K, c.out_f32, fast, c.w->data, xq.q.data,
                    c.out->data, c.ws.s, xq.scales.ptr<float>()))
    return false;
  if (const bf16* bias = c.bias_ptr()) {
    fp8_add_bias_kernel<<<cuda::grid_stride_blocks(c.T * c.N, 256), 256, 0, be.stream()>>>(
        c.out->ptr<bf16>(), bias, c.T, c.N);
    TANDEM_CUDA_LAUNCHED("fp8_add_bias_kernel");
  }
  return true;
}

// cuBLASLt's unscaled e4m3 GEMM into an f32 accumulator, then the scale kernel; false:
// refused.
bool launch_lt_epilogue(CudaBackend& be, const cuda::LtContext& ctx, const Fp8Call& c,
                        const Fp8Input& xq, bool fast) {
  Tensor acc = be.alloc(DType::F32, {c.T, c.N});
  if (!run_fp8_gemm(ctx, be.device_index(), c.T, c.N, c.K, true, fast, c.w->data, xq.q.data,
                    acc.data, nullptr, nullptr))
    return false;
  const unsigned blocks = cuda::grid_stride_blocks(c.T * c.N, 256);
  const float* x_scales = xq.scales.ptr<float>();
  if (c.out_f32)
    fp8_scale_kernel<float><<<blocks, 256, 0, be.stream()>>>(
        c.out->ptr<float>(), acc.ptr<float>(), x_scales, c.ws, c.bias_ptr(), c.T, c.N);
  else
    fp8_scale_kernel<bf16><<<blocks, 256, 0, be.stream()>>>(c.out->ptr<bf16>(), acc.ptr<float>(),
                                                            x_scales, c.ws, c.bias_ptr(), c.T, c.N);
  TANDEM_CUDA_LAUNCHED("fp8_scale_kernel");
  return true;
}

// fp8_stream_kernel: a warp per output row, kPlainRows tokens per block.
void launch_plain_stream(CudaBackend& be, const Fp8Call& c, const Fp8Input& xq) {
  const bool vec = c.K % 16 == 0 && c.group % 16 == 0 && cuda::aligned16(c.w->data) &&
                   cuda::aligned16(xq.q.data);
  const dim3 grid(unsigned(cuda::ceil_div(c.N, kPlainWarps)),
                  unsigned(cuda::ceil_div(c.T, kPlainRows)));
  const dim3 threads(kPlainWarps * 32);
  auto launch = [&](auto kernel, auto* o) {
    kernel<<<grid, threads, 0, be.stream()>>>(o, xq.q.ptr<uint8_t>(), xq.scales.ptr<float>(),
                                              c.w->ptr<uint8_t>(), c.ws, c.bias_ptr(), c.T, c.N,
                                              c.K, c.group, cuda::ceil_div(c.K, c.group));
  };
  if (c.out_f32)
    launch(vec ? &fp8_stream_kernel<true, float> : &fp8_stream_kernel<false, float>,
           c.out->ptr<float>());
  else
    launch(vec ? &fp8_stream_kernel<true, bf16> : &fp8_stream_kernel<false, bf16>,
           c.out->ptr<bf16>());
  TANDEM_CUDA_LAUNCHED("fp8_stream_kernel");
}

}  // namespace

namespace cuda {

// The one launch site of quantize_rows_kernel: the FP8 linears and the FP8 experts
// (cuda_moe.cu) quantize their inputs through it.
void launch_quantize_rows(cudaStream_t stream, uint8_t* xq, float* scales, const bf16* x, int64_t T,
                          int64_t K, int64_t group, const float* static_scale) {
  if (T == 0) return;
  const bool vec = K % 8 == 0 && group % 8 == 0 && aligned16(x) && aligned16(xq);
  launch_pdl("quantize_rows_kernel", vec ? &quantize_rows_kernel<true> : &quantize_rows_kernel<false>,
             dim3(unsigned(T)), dim3(256), 0, stream, xq, scales, x, K, group, ceil_div(K, group),
             static_scale);
}

// ---------------------------------------------------------------- checks

// Every check of linear_fp8: dtypes, shapes, the scales' layout (linear.h).
Fp8Call check_fp8_call(Tensor& out, const Tensor& x, const Linear& l) {
  const Tensor &w = l.weight, &bias = l.bias;
  const LinearQuant& q = *l.quant;
  const bool out_f32 = out.dtype == DType::F32;
  cuda::check_tensor(out, out_f32 ? DType::F32 : DType::BF16, "linear fp8", "out");
  TANDEM_CUDA_REQUIRE(!(out_f32 && bias.defined()), "linear fp8: an f32 output takes no bias");
  cuda::check_tensor(x, DType::BF16, "linear fp8", "x");
  cuda::check_tensor(w, DType::F8E4M3, "linear fp8", "w");
  cuda::check_tensor(q.weight_scale, DType::F32, "linear fp8", "weight_scale");
  TANDEM_CUDA_REQUIRE(w.ndim() == 2, "linear fp8: w must be 2-d, got " + w.shape.str());
  const int64_t T = x.rows(), K = w.dim(1), N = w.dim(0);
  TANDEM_CUDA_REQUIRE(x.cols() == K && K > 0,
                      "linear fp8: x " + x.shape.str() + " does not match w " + w.shape.str());
  TANDEM_CUDA_REQUIRE(out.rows() == T && out.cols() == N,
                      "linear fp8: out " + out.shape.str() + " must be " + dims(T, N));
  TANDEM_CUDA_REQUIRE(out.data != x.data, "linear fp8: out may not alias x");
  TANDEM_CUDA_REQUIRE(q.input != InputScaling::None,
                      "linear fp8: FP8 weights need quantized inputs (W8A8)");
  const bool block = q.granularity == ScaleGranularity::Block;
  TANDEM_CUDA_REQUIRE(!block || (q.block_n > 0 && q.block_k > 0),
                      "linear fp8: block scales need block sizes");
  const WeightScales ws = cuda::weight_scales(q, K);
  const int64_t want = ws.count(N);
  TANDEM_CUDA_REQUIRE(q.weight_scale.numel() == want,
                      "linear fp8: weight_scale " + q.weight_scale.shape.str() + " must have " +
                          std::to_string(want) + " values for w " + w.shape.str());
  const float* static_scale = nullptr;
  if (q.input == InputScaling::Static) {
    cuda::check_tensor(q.input_scale, DType::F32, "linear fp8", "input_scale");
    TANDEM_CUDA_REQUIRE(q.input_scale.numel() == 1, "linear fp8: input_scale must be [1]");
    static_scale = q.input_scale.ptr<float>();
  }
  if (bias.defined()) {
    cuda::check_tensor(bias, DType::BF16, "linear fp8", "bias");
    TANDEM_CUDA_REQUIRE(bias.numel() == N, "linear fp8: bias " + bias.shape.str() +
                                               " must have " + std::to_string(N) + " elements");
  }
  return Fp8Call{&out, &x, &w, ws, &bias, static_scale, T, N, K, block ? q.block_k : K, out_f32};
}

// 1–8 rows: the FP8 weight stream, which quantizes x in each of its CTAs (so no quantize
// kernel runs before it).
bool takes_weight_stream(const Fp8Call& c, Fp8GemmPath forced, bool stream_on) {
  return (forced == Fp8GemmPath::Auto || forced == Fp8GemmPath::Lt) && stream_on &&
         fp8_gemv_fits(c.T, c.N, c.K, c.ws.block() ? c.group : 0, c.x->data, c.w->data);
}

}  // namespace cuda

// out [T, N] = x [T, K] · (scaled Wq)ᵀ (+ bias), the declared W8A8 arithmetic.
// linear() with x's e4m3 copy from the op that wrote x (Fp8Input): where the Linear takes it,
// the copy replaces the quantize kernel. (The weight stream, 1-8 rows, quantizes x in each
// CTA all the same; the ops make no copy for so few rows: alloc_fp8_input.)
void CudaBackend::linear_fp8_input(Tensor& out, const Tensor& x, const Fp8Input& xq,
                                   const Linear& l) {
  if (!xq.defined() || !l.takes_fp8_input()) return linear(out, x, l);
  cuda::check_tensor(xq.q, DType::F8E4M3, "linear fp8", "x's e4m3 copy");
  cuda::check_tensor(xq.scales, DType::F32, "linear fp8", "x's scales");
  TANDEM_CUDA_REQUIRE(xq.q.shape == x.shape && xq.scales.numel() == x.rows(),
                      "linear fp8: x's e4m3 copy " + xq.q.shape.str() + " / scales " +
                          xq.scales.shape.str() + " do not match x " + x.shape.str());
  linear_fp8(out, x, l, &xq);
}

// Checks, then the weight stream (1–8 rows), else x quantized (or its copy from the op that
// wrote it: pre) and the first path of choose_fp8_path that takes the call.
void CudaBackend::linear_fp8(Tensor& out, const Tensor& x, const Linear& l, const Fp8Input* pre) {
  const Fp8Call c = cuda::check_fp8_call(out, x, l);
  if (c.T == 0 || c.N == 0) return;
  TANDEM_CUDA_REQUIRE(cuda::ceil_div(c.T, kPlainRows) <= 65535 && c.N < (int64_t(1) << 31),
                      "linear fp8: dims too large");
  const Fp8GemmPath forced = fp8_path_;
  if (cuda::takes_weight_stream(c, forced, options_.gemv))
    return launch_fp8_gemv(*this, out, {&x, c.static_scale, &l.weight, c.ws, &l.bias});
  const Fp8Input xq = pre != nullptr ? *pre : quantize_input(*this, c);
  const bool fast = options_.fp8_fast_accum;
  const cuda::LtContext lt{cublas_lt_, stream_, allocator_->workspace()};
  switch (choose_fp8_path(c, xq, forced, props_)) {
    case Fp8Path::Wgmma:
      return launch_fp8_wgmma(
          *this, {&out, &xq.q, &xq.scales, &l.weight, c.ws.s, c.ws.per_channel(), &l.bias, fast});
    case Fp8Path::LtScaled:
      if (launch_lt_scaled(*this, lt, c, xq, fast)) return;
      [[fallthrough]];
    case Fp8Path::LtEpilogue:
      if (launch_lt_epilogue(*this, lt, c, xq, fast)) return;
      [[fallthrough]];
    case Fp8Path::PlainStream:
      return launch_plain_stream(*this, c, xq);
  }
}

}  // namespace tandem
