// Per-row normalization and elementwise ops on CUDA: rms_norm, add_rms_norm, add, scale,
// softcap, gated_act. Storage bf16 (the elementwise ops also take f32), arithmetic f32.
// Rows whose length and pointers allow it move 16 bytes per load.
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;

// ---------------------------------------------------------------- kernels

// The residual update of N values: v = bf16(v + x), as stored.
template <int N>
__device__ __forceinline__ void add_rounded(float (&v)[N], const float (&xv)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) v[i] = cuda::to_f32(__float2bfloat16_rn(v[i] + xv[i]));
}

// v = (v · r) · (w + offset), HF order; with kQuant also amax = max(amax, |bf16(v)|), the
// stored values' largest magnitude.
template <int N, bool kQuant>
__device__ __forceinline__ void normalize(float (&v)[N], float r, const float (&wv)[N],
                                          float offset, float& amax) {
#pragma unroll
  for (int i = 0; i < N; i++) v[i] = (v[i] * r) * (wv[i] + offset);
  if constexpr (kQuant)
#pragma unroll
    for (int i = 0; i < N; i++) amax = fmaxf(amax, fabsf(cuda::to_f32(__float2bfloat16_rn(v[i]))));
}

// One row of (add_)rms_norm, done by a group of G threads (a warp or a block), thread g
// handling elements [c, c + N) for c = g*N, g*N + G*N, ... in both passes, so each thread
// reads back only what it wrote itself (in place and residual updates need no barrier).
// With kResidual: res = bf16(res + x), and the norm is of the stored (rounded) res.
// Then out = res / rms(res) * (w + offset), HF order: normalize, then weigh.
// With kQuant (Fp8Input, backend/linear.h): also q = out's e4m3 copy and *scale its per-token
// scale, from the stored (rounded) out, as the FP8 linears' quantize kernel would make them;
// `max` is the group's max reduction.
template <int N, bool kVec, bool kResidual, bool kQuant, typename W, typename Reduce, typename Max>
__device__ __forceinline__ void rms_norm_row(bf16* out, bf16* res, const bf16* x, const W* w,
                                             int64_t C, float eps, float offset, int g, int G,
                                             Reduce reduce, uint8_t* q, float* scale, Max max) {
  const bf16* in = kResidual ? res : x;
  float sum_sq = 0.f;
  for (int64_t c = int64_t(g) * N; c < C; c += int64_t(G) * N) {
    float v[N];
    cuda::load_n<N, kVec>(in + c, v);
    if constexpr (kResidual) {
      float xv[N];
      cuda::load_n<N, kVec>(x + c, xv);
      add_rounded(v, xv);
      cuda::store_n<N, kVec>(res + c, v);
    }
#pragma unroll
    for (int i = 0; i < N; i++) sum_sq += v[i] * v[i];
  }
  const float r = 1.f / sqrtf(reduce(sum_sq) / float(C) + eps);
  float amax = 0.f;
  for (int64_t c = int64_t(g) * N; c < C; c += int64_t(G) * N) {
    float v[N], wv[N];
    cuda::load_n<N, kVec>(in + c, v);
    cuda::load_n<N, kVec>(w + c, wv);
    normalize<N, kQuant>(v, r, wv, offset, amax);
    cuda::store_n<N, kVec>(out + c, v);
  }
  if constexpr (kQuant) {
    const double s = cuda::f8_row_scale(max(amax));
    cuda::quantize_row<N, kVec>(q, out, C, g, G, s);
    if (g == 0) *scale = float(s);
  }
}

// One warp per row (short rows: per-head q/k norms, small hidden sizes).
//   out, x, res [R, C], w [C]; with kQuant q [R, C], scales [R]
template <int N, bool kVec, bool kResidual, typename W, bool kQuant = false>
__global__ void rms_norm_warp_kernel(bf16* out, bf16* res, const bf16* x, const W* w, int64_t R,
                                     int64_t C, float eps, float offset, uint8_t* q,
                                     float* scales) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= R) return;  // the whole warp leaves together
  const int64_t o = row * C;
  rms_norm_row<N, kVec, kResidual, kQuant>(
      out + o, kResidual ? res + o : nullptr, x + o, w, C, eps, offset, int(threadIdx.x & 31), 32,
      [](float v) { return cuda::warp_sum(v); }, kQuant ? q + o : nullptr,
      kQuant ? scales + row : nullptr, [](float v) { return cuda::warp_max(v); });
}

// One block per row (long rows: the hidden state).
template <int N, bool kVec, bool kResidual, typename W, bool kQuant = false>
__global__ void rms_norm_block_kernel(bf16* out, bf16* res, const bf16* x, const W* w, int64_t C,
                                      float eps, float offset, uint8_t* q, float* scales) {
  __shared__ float scratch[32];
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t o = int64_t(blockIdx.x) * C;
  rms_norm_row<N, kVec, kResidual, kQuant>(
      out + o, kResidual ? res + o : nullptr, x + o, w, C, eps, offset, int(threadIdx.x),
      int(blockDim.x), [&](float v) { return cuda::block_sum(v, scratch); },
      kQuant ? q + o : nullptr, kQuant ? scales + blockIdx.x : nullptr,
      [&](float v) { return cuda::block_max(v, scratch); });
}

// rms_norm_block_kernel for rows of at most kHeld vectors a thread (the hidden states of
// today's models): w is read before the wait (weights are never written by a step, so its
// HBM latency hides behind the kernel before), and each thread keeps its values in registers
// between the two passes instead of reading them back. The same sums in the same order, so
// the same bits. In a decode step the norm's loads queue behind the next linear's weight
// copies already in flight on the SM, so each round trip it saves is worth ~0.5 µs: FP8
// decode-b1 on an H100's 8B shape went 3.76 -> 3.73 ms a step (bench/RESULTS.md, session 22).
constexpr int kHeld = 2;
template <int N, bool kResidual, typename W, bool kQuant = false>
__global__ void rms_norm_held_kernel(bf16* out, bf16* res, const bf16* x, const W* w, int64_t C,
                                     float eps, float offset, uint8_t* q, float* scales) {
  __shared__ float scratch[32];
  const int g = int(threadIdx.x), G = int(blockDim.x);
  float wv[kHeld][N];
#pragma unroll
  for (int it = 0; it < kHeld; it++) {
    const int64_t c = (int64_t(g) + int64_t(it) * G) * N;
    if (c < C) cuda::load_n<N, true>(w + c, wv[it]);
  }
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t o = int64_t(blockIdx.x) * C;
  const bf16* in = kResidual ? res + o : x + o;
  float v[kHeld][N];
  float sum_sq = 0.f;
#pragma unroll
  for (int it = 0; it < kHeld; it++) {
    const int64_t c = (int64_t(g) + int64_t(it) * G) * N;
    if (c >= C) continue;
    cuda::load_n<N, true>(in + c, v[it]);
    if constexpr (kResidual) {
      float xv[N];
      cuda::load_n<N, true>(x + o + c, xv);
      add_rounded(v[it], xv);
      cuda::store_n<N, true>(res + o + c, v[it]);
    }
#pragma unroll
    for (int i = 0; i < N; i++) sum_sq += v[it][i] * v[it][i];
  }
  const float r = 1.f / sqrtf(cuda::block_sum(sum_sq, scratch) / float(C) + eps);
  float amax = 0.f;
#pragma unroll
  for (int it = 0; it < kHeld; it++) {
    const int64_t c = (int64_t(g) + int64_t(it) * G) * N;
    if (c >= C) continue;
    normalize<N, kQuant>(v[it], r, wv[it], offset, amax);
    cuda::store_n<N, true>(out + o + c, v[it]);
  }
  if constexpr (kQuant) {
    const double s = cuda::f8_row_scale(cuda::block_max(amax, scratch));
    cuda::quantize_row<N, true>(q + o, out + o, C, g, G, s);
    if (g == 0) scales[blockIdx.x] = float(s);
  }
}

// Elementwise maps over n elements; `fn(a, b)` gives the output (b is ignored by unary maps).
struct AddFn {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct ScaleFn {
  float s;
  __device__ float operator()(float a, float) const { return a * s; }
};
struct SoftcapFn {
  float cap;
  __device__ float operator()(float a, float) const { return cap * tanhf(a / cap); }
};

//   out, a, b [n] (b may equal a for unary maps). Grid-stride over packs of N elements.
template <typename T, int N, bool kVec, typename Fn>
__global__ void map_kernel(T* out, const T* a, const T* b, int64_t n, Fn fn) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * N;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * N; i < n; i += stride) {
    float av[N], bv[N];
    cuda::load_n<N, kVec>(a + i, av);
    cuda::load_n<N, kVec>(b + i, bv);
#pragma unroll
    for (int j = 0; j < N; j++) av[j] = fn(av[j], bv[j]);
    cuda::store_n<N, kVec>(out + i, av);
  }
}

// out[t, f] = act(gate[t, f]) * up[t, f], gate_up row = [gate (F) | up (F)]. F % N == 0.
//   out [T, F], gate_up [T, 2F]
template <Activation A, int N, bool kVec>
__global__ void gated_act_kernel(bf16* __restrict__ out, const bf16* __restrict__ gate_up,
                                 int64_t T, int64_t F) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t total = T * F, stride = int64_t(gridDim.x) * blockDim.x * N;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * N; i < total; i += stride) {
    const int64_t t = i / F, f = i - t * F;
    float g[N], u[N];
    cuda::load_n<N, kVec>(gate_up + t * 2 * F + f, g);
    cuda::load_n<N, kVec>(gate_up + t * 2 * F + F + f, u);
#pragma unroll
    for (int j = 0; j < N; j++) g[j] = cuda::activate<A>(g[j]) * u[j];
    cuda::store_n<N, kVec>(out + i, g);
  }
}

// gated_act_kernel's rows with their e4m3 copy (Fp8Input): one block per row t, which
// writes out[t] and then q[t] = e4m3(out[t] / s[t]) from the stored (rounded) values, the
// FP8 linears' own per-token quantization of out.   out [T, F], gate_up [T, 2F], q [T, F],
// scales [T]
template <Activation A, int N, bool kVec>
__global__ void gated_act_fp8_kernel(bf16* __restrict__ out, const bf16* __restrict__ gate_up,
                                     int64_t F, uint8_t* __restrict__ q, float* __restrict__ scales) {
  __shared__ float scratch[32];
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t t = blockIdx.x;
  const bf16* gu = gate_up + t * 2 * F;
  bf16* row = out + t * F;
  float amax = 0.f;
  for (int64_t c = int64_t(threadIdx.x) * N; c < F; c += int64_t(blockDim.x) * N) {
    float g[N], u[N];
    cuda::load_n<N, kVec>(gu + c, g);
    cuda::load_n<N, kVec>(gu + F + c, u);
#pragma unroll
    for (int j = 0; j < N; j++) {
      g[j] = cuda::activate<A>(g[j]) * u[j];
      amax = fmaxf(amax, fabsf(cuda::to_f32(__float2bfloat16_rn(g[j]))));
    }
    cuda::store_n<N, kVec>(row + c, g);
  }
  const double s = cuda::f8_row_scale(cuda::block_max(amax, scratch));
  cuda::quantize_row<N, kVec>(q + t * F, row, F, int(threadIdx.x), int(blockDim.x), s);
  if (threadIdx.x == 0) scales[t] = float(s);
}

// ---------------------------------------------------------------- launch helpers

constexpr int kWarpRowsMaxC = 1024;  // rows up to this long get one warp each

// q / scales: out's e4m3 copy and its scales (Fp8Input), or null.
template <bool kResidual, typename W>
void launch_rms_norm(cudaStream_t stream, bf16* out, bf16* res, const bf16* x, const W* w,
                     int64_t R, int64_t C, float eps, float offset, bool vec, uint8_t* q,
                     float* scales) {
  constexpr const char* kName = kResidual ? "add_rms_norm kernel" : "rms_norm kernel";
  const bool quant = q != nullptr;
  if (C <= kWarpRowsMaxC) {
    const int rows_per_block = 4;
    const unsigned grid = unsigned(cuda::ceil_div(R, rows_per_block));
    auto* kernel = vec ? (quant ? &rms_norm_warp_kernel<8, true, kResidual, W, true>
                                : &rms_norm_warp_kernel<8, true, kResidual, W>)
                       : (quant ? &rms_norm_warp_kernel<1, false, kResidual, W, true>
                                : &rms_norm_warp_kernel<1, false, kResidual, W>);
    cuda::launch_pdl(kName, kernel, dim3(grid), dim3(32 * rows_per_block), 0, stream, out, res,
                     x, w, R, C, eps, offset, q, scales);
    return;
  }
  const int threads = C >= 8 * 512 ? 512 : 256;  // a block per row
  if (vec && C <= int64_t(kHeld) * 8 * threads) {
    auto* kernel = quant ? &rms_norm_held_kernel<8, kResidual, W, true>
                         : &rms_norm_held_kernel<8, kResidual, W>;
    cuda::launch_pdl(kName, kernel, dim3(unsigned(R)), dim3(threads), 0, stream, out, res, x, w,
                     C, eps, offset, q, scales);
  } else {
    auto* kernel = vec ? (quant ? &rms_norm_block_kernel<8, true, kResidual, W, true>
                                : &rms_norm_block_kernel<8, true, kResidual, W>)
                       : (quant ? &rms_norm_block_kernel<1, false, kResidual, W, true>
                                : &rms_norm_block_kernel<1, false, kResidual, W>);
    cuda::launch_pdl(kName, kernel, dim3(unsigned(R)), dim3(threads), 0, stream, out, res, x, w,
                     C, eps, offset, q, scales);
  }
}

// Dispatches on w's dtype (bf16 weights as loaded, or f32).
template <bool kResidual>
void rms_norm_any_w(cudaStream_t stream, bf16* out, bf16* res, const bf16* x, const Tensor& w,
                    int64_t R, int64_t C, float eps, float offset, bool vec,
                    uint8_t* q = nullptr, float* scales = nullptr) {
  vec = vec && cuda::aligned16(w.data);
  if (w.dtype == DType::BF16)
    launch_rms_norm<kResidual>(stream, out, res, x, w.ptr<bf16>(), R, C, eps, offset, vec, q, scales);
  else
    launch_rms_norm<kResidual>(stream, out, res, x, w.ptr<float>(), R, C, eps, offset, vec, q, scales);
}

// Runs fn over the n elements of out (= fn(a, b)) in a's dtype.
template <typename Fn>
void launch_map(cudaStream_t stream, Tensor& out, const Tensor& a, const Tensor& b, Fn fn) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool aligned =
      cuda::aligned16(out.data) && cuda::aligned16(a.data) && cuda::aligned16(b.data);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    constexpr int P = cuda::kPack<T>;
    const bool vec = aligned && n % P == 0;
    cuda::launch_pdl("map_kernel", vec ? &map_kernel<T, P, true, Fn> : &map_kernel<T, 1, false, Fn>,
                     dim3(cuda::grid_stride_blocks(vec ? n / P : n, 256)), dim3(256), 0, stream,
                     out.ptr<T>(), a.ptr<T>(), b.ptr<T>(), n, fn);
  };
  if (out.dtype == DType::BF16)
    run(bf16{});
  else
    run(float{});
}

template <Activation A>
void launch_gated_act(cudaStream_t stream, bf16* out, const bf16* gate_up, int64_t T, int64_t F,
                      bool vec) {
  auto* kernel = vec ? &gated_act_kernel<A, 8, true> : &gated_act_kernel<A, 1, false>;
  cuda::launch_pdl("gated_act kernel", kernel,
                   dim3(cuda::grid_stride_blocks(vec ? T * F / 8 : T * F, 256)), dim3(256), 0,
                   stream, out, gate_up, T, F);
}

void check_norm_weight(const Tensor& w, int64_t C, const char* op) {
  cuda::check_float(w, op, "w");
  TANDEM_CUDA_REQUIRE(C > 0 && w.numel() == C, std::string(op) + ": w " + w.shape.str() +
                                                   " must have " + std::to_string(C) + " elements");
}

}  // namespace

// ---------------------------------------------------------------- launchers

// The e4m3 copy of an [R, C] output and its scales (2-3% more offline throughput than a
// quantize kernel before the linear), or an undefined one for at most kFp8GemvMaxRows rows:
// the FP8 weight stream that takes those quantizes x in each of its CTAs, under the weights'
// first bytes, and a copy made before it only lengthens the step (decode-b1 on the H200's 8B
// shape: 306 -> 292 tok/s with one; bench/RESULTS.md, 2026-12-02, third session).
Fp8Input CudaBackend::alloc_fp8_input(int64_t R, int64_t C) {
  if (R <= kFp8GemvMaxRows) return Fp8Input{};
  return Fp8Input{alloc(DType::F8E4M3, {R, C}), alloc(DType::F32, {R})};
}

// Per row: out = x / rms(x) * (w + weight_offset).   x, out [R, C], w [C]. In place allowed.
// q: out's e4m3 copy (Fp8Input), or null.
void CudaBackend::norm(Tensor& out, const Tensor& x, const Tensor& w, float eps,
                       float weight_offset, Fp8Input* q) {
  cuda::check_tensor(out, DType::BF16, "rms_norm", "out");
  cuda::check_tensor(x, DType::BF16, "rms_norm", "x");
  const int64_t R = x.rows(), C = x.cols();
  check_norm_weight(w, C, "rms_norm");
  TANDEM_CUDA_REQUIRE(out.rows() == R && out.cols() == C,
                      "rms_norm: out " + out.shape.str() + " must match x " + x.shape.str());
  if (q != nullptr) *q = alloc_fp8_input(R, C);
  if (R == 0) return;
  const bool vec = C % 8 == 0 && cuda::aligned16(out.data) && cuda::aligned16(x.data);
  const bool quant = q != nullptr && q->defined();
  rms_norm_any_w<false>(stream_, out.ptr<bf16>(), nullptr, x.ptr<bf16>(), w, R, C, eps,
                        weight_offset, vec, quant ? q->q.ptr<uint8_t>() : nullptr,
                        quant ? q->scales.ptr<float>() : nullptr);
}

// residual += x; out = rms_norm(residual).   residual, x, out [R, C], w [C]; q as norm().
void CudaBackend::add_norm(Tensor& out, Tensor& residual, const Tensor& x, const Tensor& w,
                           float eps, float weight_offset, Fp8Input* q) {
  cuda::check_tensor(out, DType::BF16, "add_rms_norm", "out");
  cuda::check_tensor(residual, DType::BF16, "add_rms_norm", "residual");
  cuda::check_tensor(x, DType::BF16, "add_rms_norm", "x");
  const int64_t R = residual.rows(), C = residual.cols();
  check_norm_weight(w, C, "add_rms_norm");
  TANDEM_CUDA_REQUIRE(x.rows() == R && x.cols() == C && out.rows() == R && out.cols() == C,
                      "add_rms_norm: x " + x.shape.str() + " and out " + out.shape.str() +
                          " must match residual " + residual.shape.str());
  TANDEM_CUDA_REQUIRE(out.data != residual.data, "add_rms_norm: out may not alias residual");
  if (q != nullptr) *q = alloc_fp8_input(R, C);
  if (R == 0) return;
  const bool vec = C % 8 == 0 && cuda::aligned16(out.data) && cuda::aligned16(x.data) &&
                   cuda::aligned16(residual.data);
  const bool quant = q != nullptr && q->defined();
  rms_norm_any_w<true>(stream_, out.ptr<bf16>(), residual.ptr<bf16>(), x.ptr<bf16>(), w, R, C, eps,
                       weight_offset, vec, quant ? q->q.ptr<uint8_t>() : nullptr,
                       quant ? q->scales.ptr<float>() : nullptr);
}

void CudaBackend::rms_norm(Tensor& out, const Tensor& x, const Tensor& w, float eps,
                           float weight_offset) {
  norm(out, x, w, eps, weight_offset, nullptr);
}

void CudaBackend::rms_norm_fp8(Tensor& out, Fp8Input& q, const Tensor& x, const Tensor& w,
                               float eps, float weight_offset) {
  norm(out, x, w, eps, weight_offset, &q);
}

void CudaBackend::add_rms_norm(Tensor& out, Tensor& residual, const Tensor& x, const Tensor& w,
                               float eps, float weight_offset) {
  add_norm(out, residual, x, w, eps, weight_offset, nullptr);
}

void CudaBackend::add_rms_norm_fp8(Tensor& out, Fp8Input& q, Tensor& residual, const Tensor& x,
                                   const Tensor& w, float eps, float weight_offset) {
  add_norm(out, residual, x, w, eps, weight_offset, &q);
}

// out = a + b (same number of elements, same dtype). In place allowed.
void CudaBackend::add(Tensor& out, const Tensor& a, const Tensor& b) {
  cuda::check_float(out, "add", "out");
  cuda::check_tensor(a, out.dtype, "add", "a");
  cuda::check_tensor(b, out.dtype, "add", "b");
  TANDEM_CUDA_REQUIRE(a.numel() == out.numel() && b.numel() == out.numel(),
                      "add: shapes out " + out.shape.str() + " a " + a.shape.str() + " b " +
                          b.shape.str() + " differ in size");
  launch_map(stream_, out, a, b, AddFn{});
}

// x *= s, in place.
void CudaBackend::scale(Tensor& x, float s) {
  cuda::check_float(x, "scale", "x");
  launch_map(stream_, x, x, x, ScaleFn{s});
}

// x = cap * tanh(x / cap), in place.
void CudaBackend::softcap(Tensor& x, float cap) {
  cuda::check_float(x, "softcap", "x");
  TANDEM_CUDA_REQUIRE(cap > 0.f, "softcap: cap " + std::to_string(cap) + " must be positive");
  launch_map(stream_, x, x, x, SoftcapFn{cap});
}

// out = act(gate) * up, where gate_up = [gate | up].   out [T, F], gate_up [T, 2F]; q: out's
// e4m3 copy (Fp8Input), or null.
void CudaBackend::act(Tensor& out, const Tensor& gate_up, Activation act, Fp8Input* q) {
  cuda::check_tensor(out, DType::BF16, "gated_act", "out");
  cuda::check_tensor(gate_up, DType::BF16, "gated_act", "gate_up");
  const int64_t T = gate_up.rows(), F = out.cols();
  TANDEM_CUDA_REQUIRE(gate_up.cols() == 2 * F && out.rows() == T,
                      "gated_act: gate_up " + gate_up.shape.str() + " must be [T, 2F] for out " +
                          out.shape.str() + " = [T, F]");
  TANDEM_CUDA_REQUIRE(out.data != gate_up.data, "gated_act: out may not alias gate_up");
  if (q != nullptr) *q = alloc_fp8_input(T, F);
  if (T * F == 0) return;
  const bool vec = F % 8 == 0 && cuda::aligned16(out.data) && cuda::aligned16(gate_up.data);
  const bool silu = act == Activation::SiLU;
  if (q == nullptr || !q->defined()) {
    if (silu)
      launch_gated_act<Activation::SiLU>(stream_, out.ptr<bf16>(), gate_up.ptr<bf16>(), T, F, vec);
    else
      launch_gated_act<Activation::GeluTanh>(stream_, out.ptr<bf16>(), gate_up.ptr<bf16>(), T, F,
                                             vec);
    return;
  }
  // One block a row: the row's amax is a block reduction.
  auto* kernel = silu ? (vec ? &gated_act_fp8_kernel<Activation::SiLU, 8, true>
                             : &gated_act_fp8_kernel<Activation::SiLU, 1, false>)
                      : (vec ? &gated_act_fp8_kernel<Activation::GeluTanh, 8, true>
                             : &gated_act_fp8_kernel<Activation::GeluTanh, 1, false>);
  const int threads = F >= 8 * 512 ? 512 : 256;
  cuda::launch_pdl("gated_act fp8 kernel", kernel, dim3(unsigned(T)), dim3(threads), 0, stream_,
                   out.ptr<bf16>(), gate_up.ptr<bf16>(), F, q->q.ptr<uint8_t>(),
                   q->scales.ptr<float>());
}

void CudaBackend::gated_act(Tensor& out, const Tensor& gate_up, Activation act_kind) {
  act(out, gate_up, act_kind, nullptr);
}

void CudaBackend::gated_act_fp8(Tensor& out, Fp8Input& q, const Tensor& gate_up,
                                Activation act_kind) {
  act(out, gate_up, act_kind, &q);
}

}  // namespace tandem
