// The ops Gemma 3n (and Gemma 4's per-layer inputs) added to the Backend, on CUDA:
// elementwise sub / mul / act_mul, activation sparsity (gaussian_topk), AltUp's stream
// magnitude matching (match_rms) and per-token stream mixing (mix_streams), and
// swap_leading_dims. CPU twins: cpu/cpu_gemma3n_ops.cpp.
// Storage bf16 or f32 (the models pass bf16 everywhere: act_dtype() and bf16 weights),
// arithmetic f32. Every op is per row or per token, so a row's result never depends on
// the other rows or on the batch size. Rows whose length and pointers allow it move 16
// bytes per load.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_check.h"

namespace tandem {

namespace {

using cuda::bf16;

// ---------------------------------------------------------------- kernels

struct SubFn {
  __device__ float operator()(float a, float b) const { return a - b; }
};
struct MulFn {
  __device__ float operator()(float a, float b) const { return a * b; }
};
template <Activation A>
struct ActMulFn {
  __device__ float operator()(float a, float b) const { return cuda::activate<A>(a) * b; }
};

// out[i] = fn(a[i], b[kBroadcast ? i % C : i]), grid-stride over packs of N elements.
// With kVec, n and C are multiples of N (a pack never straddles a row of b).
//   out, a [n] = [R, C]; b [n], or [C] with kBroadcast
template <typename T, typename B, int N, bool kVec, bool kBroadcast, typename Fn>
__global__ void binary_kernel(T* out, const T* a, const B* b, int64_t n, int64_t C, Fn fn) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * N;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * N; i < n; i += stride) {
    float av[N], bv[N];
    cuda::load_n<N, kVec>(a + i, av);
    cuda::load_n<N, kVec>(b + (kBroadcast ? i % C : i), bv);
#pragma unroll
    for (int j = 0; j < N; j++) av[j] = fn(av[j], bv[j]);
    cuda::store_n<N, kVec>(out + i, av);
  }
}

// One block per row: x = relu(x - (mean + std · k)), mean and population std (÷C) in
// f32, the std from a second pass over the deviations (no E[x²] − mean² cancellation).
// Thread g handles the packs at c = g·N, g·N + G·N, ... in every pass, so in place it
// writes only what it read itself.   x [R, C]
template <typename T, int N, bool kVec>
__global__ void gaussian_topk_kernel(T* x, int64_t C, float std_multiplier) {
  __shared__ float scratch[32];
  T* row = x + int64_t(blockIdx.x) * C;
  const int64_t first = int64_t(threadIdx.x) * N, step = int64_t(blockDim.x) * N;
  float sum = 0.f;
  for (int64_t c = first; c < C; c += step) {
    float v[N];
    cuda::load_n<N, kVec>(row + c, v);
#pragma unroll
    for (int j = 0; j < N; j++) sum += v[j];
  }
  const float mean = cuda::block_sum(sum, scratch) / float(C);
  float sum_dev = 0.f;
  for (int64_t c = first; c < C; c += step) {
    float v[N];
    cuda::load_n<N, kVec>(row + c, v);
#pragma unroll
    for (int j = 0; j < N; j++) sum_dev += (v[j] - mean) * (v[j] - mean);
  }
  const float std_dev = sqrtf(cuda::block_sum(sum_dev, scratch) / float(C));
  const float cutoff = mean + std_dev * std_multiplier;
  for (int64_t c = first; c < C; c += step) {
    float v[N];
    cuda::load_n<N, kVec>(row + c, v);
#pragma unroll
    for (int j = 0; j < N; j++) v[j] = fmaxf(v[j] - cutoff, 0.f);
    cuda::store_n<N, kVec>(row + c, v);
  }
}

// One block per row: x = x · rms(ref) / sqrt(max(mean(x²), floor)), in HF's order
// (multiply, then divide). Same thread-to-pack mapping as gaussian_topk_kernel.
//   x, ref [R, C]
template <typename T, typename Ref, int N, bool kVec>
__global__ void match_rms_kernel(T* x, const Ref* ref, int64_t C, float min_mean_square) {
  __shared__ float scratch[32];
  T* row = x + int64_t(blockIdx.x) * C;
  const Ref* ref_row = ref + int64_t(blockIdx.x) * C;
  const int64_t first = int64_t(threadIdx.x) * N, step = int64_t(blockDim.x) * N;
  float sum_sq = 0.f, ref_sum_sq = 0.f;
  for (int64_t c = first; c < C; c += step) {
    float v[N], r[N];
    cuda::load_n<N, kVec>(row + c, v);
    cuda::load_n<N, kVec>(ref_row + c, r);
#pragma unroll
    for (int j = 0; j < N; j++) {
      sum_sq += v[j] * v[j];
      ref_sum_sq += r[j] * r[j];
    }
  }
  const float target = sqrtf(cuda::block_sum(ref_sum_sq, scratch) / float(C));
  const float current = sqrtf(fmaxf(cuda::block_sum(sum_sq, scratch) / float(C), min_mean_square));
  for (int64_t c = first; c < C; c += step) {
    float v[N];
    cuda::load_n<N, kVec>(row + c, v);
#pragma unroll
    for (int j = 0; j < N; j++) v[j] = v[j] * target / current;
    cuda::store_n<N, kVec>(row + c, v);
  }
}

// out[m, t, c] += Σ_s coefs[t, m·S + s] · x[s, t, c], the sum in f32 over s in order, then
// added to out once. One thread per pack of N outputs, grid-stride over M·T·C.
// With kVec, C is a multiple of N.   out [M, T, C], x [S, T, C], coefs [T, M·S]
template <typename X, typename K, int N, bool kVec>
__global__ void mix_streams_kernel(X* out, const X* x, const K* coefs, int64_t M, int64_t S,
                                   int64_t T, int64_t C) {
  const int64_t total = M * T * C, stride = int64_t(gridDim.x) * blockDim.x * N;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * N; i < total; i += stride) {
    const int64_t mt = i / C, c = i - mt * C, m = mt / T, t = mt - m * T;
    const K* k = coefs + (t * M + m) * S;
    float acc[N] = {};
    for (int64_t s = 0; s < S; s++) {
      const float ks = cuda::to_f32(k[s]);
      float xv[N];
      cuda::load_n<N, kVec>(x + (s * T + t) * C + c, xv);
#pragma unroll
      for (int j = 0; j < N; j++) acc[j] += ks * xv[j];
    }
    float o[N];
    cuda::load_n<N, kVec>(out + i, o);
#pragma unroll
    for (int j = 0; j < N; j++) o[j] += acc[j];
    cuda::store_n<N, kVec>(out + i, o);
  }
}

// out[b, a, :] = x[a, b, :], moving rows of `row_words` words W (any dtype: a pure copy).
// Grid-stride over the A·B·row_words words of x.   out [B, A, row], x [A, B, row]
template <typename W>
__global__ void swap_leading_dims_kernel(W* __restrict__ out, const W* __restrict__ x, int64_t A,
                                         int64_t B, int64_t row_words) {
  const int64_t total = A * B * row_words, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t ab = i / row_words, w = i - ab * row_words, a = ab / B, b = ab - a * B;
    out[(b * A + a) * row_words + w] = x[i];
  }
}

// ---------------------------------------------------------------- launch helpers

constexpr int kMapThreads = 256;

template <bool kBroadcast, typename T, typename B, typename Fn>
void launch_binary(cudaStream_t stream, T* out, const T* a, const B* b, int64_t n, int64_t C,
                   Fn fn) {
  constexpr int P = cuda::kPack<T>;
  const bool vec =
      n % P == 0 && C % P == 0 && cuda::aligned16(out) && cuda::aligned16(a) && cuda::aligned16(b);
  if (vec)
    binary_kernel<T, B, P, true, kBroadcast>
        <<<cuda::grid_stride_blocks(n / P, kMapThreads), kMapThreads, 0, stream>>>(out, a, b, n, C,
                                                                                   fn);
  else
    binary_kernel<T, B, 1, false, kBroadcast>
        <<<cuda::grid_stride_blocks(n, kMapThreads), kMapThreads, 0, stream>>>(out, a, b, n, C, fn);
}

// out = fn(a, b) elementwise in out's dtype (a has it too); b in either float dtype,
// broadcast as one row of C when kBroadcast.
template <bool kBroadcast, typename Fn>
void run_binary(cudaStream_t stream, Tensor& out, const Tensor& a, const Tensor& b, int64_t C,
                Fn fn, const char* name) {
  const int64_t n = out.numel();
  if (n == 0) return;
  auto with_b = [&](auto* outp, auto* ap) {
    if (b.dtype == DType::BF16)
      launch_binary<kBroadcast>(stream, outp, ap, b.ptr<bf16>(), n, C, fn);
    else
      launch_binary<kBroadcast>(stream, outp, ap, b.ptr<float>(), n, C, fn);
  };
  if (out.dtype == DType::BF16)
    with_b(out.ptr<bf16>(), static_cast<const bf16*>(a.ptr<bf16>()));
  else
    with_b(out.ptr<float>(), static_cast<const float*>(a.ptr<float>()));
  TANDEM_CUDA_LAUNCHED(name);
}

// Shared argument checks of sub / act_mul: out and a of one float dtype, b of either,
// all of one size.
void check_same_size(const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  cuda::check_float(out, op, "out");
  cuda::check_tensor(a, out.dtype, op, "a");
  cuda::check_float(b, op, "b");
  TANDEM_CUDA_REQUIRE(a.numel() == out.numel() && b.numel() == out.numel(),
                      std::string(op) + ": shapes out " + out.shape.str() + " a " + a.shape.str() +
                          " b " + b.shape.str() + " differ in size");
}

// Threads for one block per row of C elements in packs of N: one pack per thread up to
// 512 threads, a multiple of 32 (block_sum needs whole warps).
int row_threads(int64_t C, int N) {
  const int64_t warps = cuda::ceil_div(cuda::ceil_div(C, N), 32);
  return int(std::clamp<int64_t>(warps, 1, 16)) * 32;
}

// Rows per launch: one block each, so R must fit the grid.
void check_row_grid(int64_t R, const char* op) {
  TANDEM_CUDA_REQUIRE(R <= int64_t(0x7fffffff),
                      std::string(op) + ": " + std::to_string(R) + " rows exceed the grid");
}

template <typename T>
void launch_gaussian_topk(cudaStream_t stream, T* x, int64_t R, int64_t C, float k) {
  constexpr int P = cuda::kPack<T>;
  if (C % P == 0 && cuda::aligned16(x))
    gaussian_topk_kernel<T, P, true><<<unsigned(R), row_threads(C, P), 0, stream>>>(x, C, k);
  else
    gaussian_topk_kernel<T, 1, false><<<unsigned(R), row_threads(C, 1), 0, stream>>>(x, C, k);
}

template <typename T, typename Ref>
void launch_match_rms(cudaStream_t stream, T* x, const Ref* ref, int64_t R, int64_t C,
                      float floor) {
  constexpr int P = cuda::kPack<T>;
  if (C % P == 0 && cuda::aligned16(x) && cuda::aligned16(ref))
    match_rms_kernel<T, Ref, P, true>
        <<<unsigned(R), row_threads(C, P), 0, stream>>>(x, ref, C, floor);
  else
    match_rms_kernel<T, Ref, 1, false>
        <<<unsigned(R), row_threads(C, 1), 0, stream>>>(x, ref, C, floor);
}

template <typename X, typename K>
void launch_mix_streams(cudaStream_t stream, X* out, const X* x, const K* coefs, int64_t M,
                        int64_t S, int64_t T, int64_t C) {
  constexpr int P = cuda::kPack<X>;
  const int64_t total = M * T * C;
  if (C % P == 0 && cuda::aligned16(out) && cuda::aligned16(x))
    mix_streams_kernel<X, K, P, true>
        <<<cuda::grid_stride_blocks(total / P, kMapThreads), kMapThreads, 0, stream>>>(
            out, x, coefs, M, S, T, C);
  else
    mix_streams_kernel<X, K, 1, false>
        <<<cuda::grid_stride_blocks(total, kMapThreads), kMapThreads, 0, stream>>>(out, x, coefs, M,
                                                                                   S, T, C);
}

template <typename W>
void launch_swap(cudaStream_t stream, void* out, const void* x, int64_t A, int64_t B,
                 int64_t row_bytes) {
  const int64_t row_words = row_bytes / int64_t(sizeof(W));
  swap_leading_dims_kernel<W>
      <<<cuda::grid_stride_blocks(A * B * row_words, kMapThreads), kMapThreads, 0, stream>>>(
          static_cast<W*>(out), static_cast<const W*>(x), A, B, row_words);
}

// True when rows of `row_bytes` at `out` and `x` may move in words of `word` bytes.
bool fits_words(const void* out, const void* x, int64_t row_bytes, int64_t word) {
  const auto aligned = [&](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % uintptr_t(word) == 0;
  };
  return row_bytes % word == 0 && aligned(out) && aligned(x);
}

}  // namespace

// ---------------------------------------------------------------- launchers

// out = a - b (same number of elements). In place allowed.
void CudaBackend::sub(Tensor& out, const Tensor& a, const Tensor& b) {
  check_same_size(out, a, b, "sub");
  run_binary<false>(stream_, out, a, b, out.numel(), SubFn{}, "sub kernel");
}

// out = a * b, b of a's size or one row [C] broadcast over a's rows. In place allowed.
//   out, a [R, C], b [R, C] or [C]
void CudaBackend::mul(Tensor& out, const Tensor& a, const Tensor& b) {
  cuda::check_float(out, "mul", "out");
  cuda::check_tensor(a, out.dtype, "mul", "a");
  cuda::check_float(b, "mul", "b");
  const int64_t n = a.numel(), C = a.cols();
  const bool broadcast = b.numel() != n;
  TANDEM_CUDA_REQUIRE(out.numel() == n && (!broadcast || b.numel() == C),
                      "mul: b " + b.shape.str() + " must match a " + a.shape.str() +
                          " or be one row of " + std::to_string(C) + "; out " + out.shape.str());
  if (broadcast)
    run_binary<true>(stream_, out, a, b, C, MulFn{}, "mul kernel");
  else
    run_binary<false>(stream_, out, a, b, n, MulFn{}, "mul kernel");
}

// out = act(a) * b.   out, a, b [R, C]
void CudaBackend::act_mul(Tensor& out, const Tensor& a, const Tensor& b, Activation act) {
  check_same_size(out, a, b, "act_mul");
  if (act == Activation::SiLU)
    run_binary<false>(stream_, out, a, b, out.numel(), ActMulFn<Activation::SiLU>{},
                      "act_mul kernel");
  else
    run_binary<false>(stream_, out, a, b, out.numel(), ActMulFn<Activation::GeluTanh>{},
                      "act_mul kernel");
}

// Per row, in place: x = relu(x - (mean(x) + std(x) · std_multiplier)).   x [R, C]
void CudaBackend::gaussian_topk(Tensor& x, float std_multiplier) {
  cuda::check_float(x, "gaussian_topk", "x");
  const int64_t C = x.cols();
  TANDEM_CUDA_REQUIRE(C > 0, "gaussian_topk: empty rows in x " + x.shape.str());
  const int64_t R = x.rows();
  check_row_grid(R, "gaussian_topk");
  if (R == 0) return;
  if (x.dtype == DType::BF16)
    launch_gaussian_topk(stream_, x.ptr<bf16>(), R, C, std_multiplier);
  else
    launch_gaussian_topk(stream_, x.ptr<float>(), R, C, std_multiplier);
  TANDEM_CUDA_LAUNCHED("gaussian_topk kernel");
}

// Per row, in place: x = x · rms(ref) / sqrt(max(mean(x²), min_mean_square)).
//   x, ref [R, C] (each bf16 or f32)
void CudaBackend::match_rms(Tensor& x, const Tensor& ref, float min_mean_square) {
  cuda::check_float(x, "match_rms", "x");
  cuda::check_float(ref, "match_rms", "ref");
  const int64_t C = x.cols();
  TANDEM_CUDA_REQUIRE(
      C > 0 && ref.cols() == C && ref.rows() == x.rows(),
      "match_rms: ref " + ref.shape.str() + " must match x " + x.shape.str() + " (non-empty rows)");
  const int64_t R = x.rows();
  check_row_grid(R, "match_rms");
  if (R == 0) return;
  auto with_ref = [&](auto* xp) {
    if (ref.dtype == DType::BF16)
      launch_match_rms(stream_, xp, ref.ptr<bf16>(), R, C, min_mean_square);
    else
      launch_match_rms(stream_, xp, ref.ptr<float>(), R, C, min_mean_square);
  };
  if (x.dtype == DType::BF16)
    with_ref(x.ptr<bf16>());
  else
    with_ref(x.ptr<float>());
  TANDEM_CUDA_LAUNCHED("match_rms kernel");
}

// out[m, t] += Σ_s coefs[t, m·S + s] · x[s, t].
//   out [M, T, C], x [S, T, C] (one float dtype), coefs [T, M·S] (bf16 or f32)
void CudaBackend::mix_streams(Tensor& out, const Tensor& x, const Tensor& coefs) {
  cuda::check_float(out, "mix_streams", "out");
  cuda::check_tensor(x, out.dtype, "mix_streams", "x");
  cuda::check_float(coefs, "mix_streams", "coefs");
  TANDEM_CUDA_REQUIRE(
      out.ndim() == 3 && x.ndim() == 3,
      "mix_streams: out " + out.shape.str() + " and x " + x.shape.str() + " must be 3-d");
  const int64_t M = out.dim(0), S = x.dim(0), T = x.dim(1), C = x.dim(2);
  TANDEM_CUDA_REQUIRE(
      out.dim(1) == T && out.dim(2) == C && coefs.numel() == T * M * S && coefs.cols() == M * S,
      "mix_streams: out " + out.shape.str() + " x " + x.shape.str() + " coefs " +
          coefs.shape.str() + " must be [M, T, C], [S, T, C], [T, M·S]");
  TANDEM_CUDA_REQUIRE(out.data != x.data, "mix_streams: out may not alias x");
  if (M * T * C == 0) return;
  auto with_coefs = [&](auto* op, auto* xp) {
    if (coefs.dtype == DType::BF16)
      launch_mix_streams(stream_, op, xp, coefs.ptr<bf16>(), M, S, T, C);
    else
      launch_mix_streams(stream_, op, xp, coefs.ptr<float>(), M, S, T, C);
  };
  if (out.dtype == DType::BF16)
    with_coefs(out.ptr<bf16>(), static_cast<const bf16*>(x.ptr<bf16>()));
  else
    with_coefs(out.ptr<float>(), static_cast<const float*>(x.ptr<float>()));
  TANDEM_CUDA_LAUNCHED("mix_streams kernel");
}

// out[b, a] = x[a, b], any dtype (a copy).   out [B, A, C], x [A, B, C]
void CudaBackend::swap_leading_dims(Tensor& out, const Tensor& x) {
  cuda::check_on_device(out, "swap_leading_dims", "out");
  cuda::check_tensor(x, out.dtype, "swap_leading_dims", "x");
  TANDEM_CUDA_REQUIRE(out.ndim() == 3 && x.ndim() == 3 && out.dim(0) == x.dim(1) &&
                          out.dim(1) == x.dim(0) && out.dim(2) == x.dim(2),
                      "swap_leading_dims: out " + out.shape.str() + " must be x " + x.shape.str() +
                          " with its two leading dims swapped");
  TANDEM_CUDA_REQUIRE(out.data != x.data, "swap_leading_dims: out may not alias x");
  const int64_t A = x.dim(0), B = x.dim(1);
  const int64_t row_bytes = x.dim(2) * int64_t(dtype_size(x.dtype));
  if (A * B * row_bytes == 0) return;
  if (fits_words(out.data, x.data, row_bytes, 16))
    launch_swap<uint4>(stream_, out.data, x.data, A, B, row_bytes);
  else if (fits_words(out.data, x.data, row_bytes, 4))
    launch_swap<uint32_t>(stream_, out.data, x.data, A, B, row_bytes);
  else if (fits_words(out.data, x.data, row_bytes, 2))
    launch_swap<uint16_t>(stream_, out.data, x.data, A, B, row_bytes);
  else
    launch_swap<uint8_t>(stream_, out.data, x.data, A, B, row_bytes);
  TANDEM_CUDA_LAUNCHED("swap_leading_dims kernel");
}

}  // namespace tandem
