// Row-moving and row-mixing ops on CUDA: linear (1–2 rows: the weight stream, cuda_gemv.cu;
// else cuBLASLt, cuda_lt_gemm.h: bf16 in/out, f32 compute, bias in the epilogue; cublasGemmEx
// where cuBLASLt takes no algorithm), embedding lookup, row gather.
//
// linear in column-major terms: row-major out [T, N] is column-major C (N x T), x [T, K] is
// column-major (K x T), w [N, K] is column-major (K x N); so C = op(W) · X with op = T:
// m = N, n = T, k = K, lda = ldb = K, ldc = N.
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_linear.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_gemv.h"
#include "backend/cuda/cuda_lt_gemm.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;

// ---------------------------------------------------------------- kernels

// out[t] = table[ids[t]] * scale; a row whose id is outside [0, V) is written as zeros
// (the engine validates ids; a kernel cannot throw).
//   out [T, D], table [V, D] bf16, ids [T]. One block per token.
template <bool kVec>
__global__ void embedding_kernel(bf16* __restrict__ out, const bf16* __restrict__ table,
                                 const int32_t* __restrict__ ids, int64_t V, int64_t D,
                                 float scale) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool valid = id >= 0 && id < V;
  const bf16* row = table + (valid ? int64_t(id) * D : 0);
  bf16* o = out + t * D;
  if constexpr (kVec) {
    constexpr int P = cuda::kPack<bf16>;
    for (int64_t c = int64_t(threadIdx.x) * P; c < D; c += int64_t(blockDim.x) * P) {
      float v[P];
      cuda::load_pack(row + c, v);
#pragma unroll
      for (int i = 0; i < P; i++) v[i] = valid ? v[i] * scale : 0.f;
      cuda::store_pack(o + c, v);
    }
  } else {
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x)
      o[c] = __float2bfloat16_rn(valid ? __bfloat162float(row[c]) * scale : 0.f);
  }
}

// out[s] = x[index[s]] as raw units of `Unit` (16, 4, 2 or 1 bytes); an index outside
// [0, T) gives a zero row.   out [S, units], x [T, units]. One block per output row.
template <typename Unit>
__global__ void gather_rows_kernel(Unit* __restrict__ out, const Unit* __restrict__ x,
                                   const int32_t* __restrict__ index, int64_t T, int64_t units) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t s = blockIdx.x;
  const int32_t i = index[s];
  const bool valid = i >= 0 && i < T;
  const Unit* src = x + (valid ? int64_t(i) * units : 0);
  Unit* dst = out + s * units;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) dst[u] = valid ? src[u] : Unit{};
}

// out[t, n] += bias[n], for the cublasGemmEx fallback.   out [T, N], bias [N]
__global__ void add_bias_kernel(bf16* __restrict__ out, const bf16* __restrict__ bias, int64_t T,
                                int64_t N) {
  const int64_t total = T * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(__bfloat162float(out[i]) + __bfloat162float(bias[i % N]));
}

}  // namespace

// ---------------------------------------------------------------- launchers

// out [T, N] = x [T, K] · w [N, K]ᵀ (+ bias [N]); x and out may carry extra leading dims.
// out is bf16, or f32 (without bias) where the sum must not be rounded: logits, router scores.
void CudaBackend::linear(Tensor& out, const Tensor& x, const Linear& l) {
  if (l.quant) return linear_fp8(out, x, l);
  if (l.weight.defined() && dtype_is_block(l.weight.dtype)) return block_linear(*this, out, x, l);
  const Tensor &w = l.weight, &bias = l.bias;
  const bool out_f32 = out.dtype == DType::F32;
  cuda::check_tensor(out, out_f32 ? DType::F32 : DType::BF16, "linear", "out");
  TANDEM_CUDA_REQUIRE(!(out_f32 && bias.defined()), "linear: an f32 output takes no bias");
  cuda::check_tensor(x, DType::BF16, "linear", "x");
  cuda::check_tensor(w, DType::BF16, "linear", "w");
  TANDEM_CUDA_REQUIRE(w.ndim() == 2, "linear: w must be 2-d, got " + w.shape.str());
  const int64_t T = x.rows(), K = w.dim(1), N = w.dim(0);
  TANDEM_CUDA_REQUIRE(x.cols() == K && K > 0,
                      "linear: x " + x.shape.str() + " does not match w " + w.shape.str());
  TANDEM_CUDA_REQUIRE(out.rows() == T && out.cols() == N, "linear: out " + out.shape.str() +
                                                              " must be [" + std::to_string(T) +
                                                              ", " + std::to_string(N) + "]");
  TANDEM_CUDA_REQUIRE(out.data != x.data && out.data != w.data, "linear: out may not alias x or w");
  if (bias.defined()) {
    cuda::check_tensor(bias, DType::BF16, "linear", "bias");
    TANDEM_CUDA_REQUIRE(bias.numel() == N, "linear: bias " + bias.shape.str() + " must have " +
                                               std::to_string(N) + " elements");
  }
  if (T == 0 || N == 0) return;
  if (T <= kGemvMaxRows && try_gemv(*this, out, x, w, bias)) return;
  // cuBLASLt's bias epilogue reads the bias with vector loads: keep it for aligned biases.
  const bool lt_bias = bias.defined() && cuda::aligned16(bias.data);
  if (!bias.defined() || lt_bias) {
    cuda::LtGemmKey key;
    key.device = device_;
    key.m = N;
    key.n = T;
    key.k = K;
    key.out_type = out_f32 ? CUDA_R_32F : CUDA_R_16BF;
    key.align_a = cuda::lt_alignment_of(w.data);
    key.align_b = cuda::lt_alignment_of(x.data);
    key.align_c = cuda::lt_alignment_of(out.data);
    key.bias = bias.defined();
    const cuda::LtContext ctx{cublas_lt_, stream_, allocator_->workspace()};
    if (cuda::run_lt_gemm(
            ctx, key, {w.data, x.data, out.data, bias.defined() ? bias.data : nullptr}, "linear"))
      return;
  }
  const float alpha = 1.f, beta = 0.f;
  TANDEM_CUDA_REQUIRE(N < (int64_t(1) << 31) && T < (int64_t(1) << 31) && K < (int64_t(1) << 31),
                      "linear: dims too large for cublasGemmEx");
  cublas_check(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K), &alpha,
                            w.data, CUDA_R_16BF, int(K), x.data, CUDA_R_16BF, int(K), &beta,
                            out.data, out_f32 ? CUDA_R_32F : CUDA_R_16BF, int(N),
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "linear: cublasGemmEx");
  if (bias.defined()) {
    add_bias_kernel<<<cuda::grid_stride_blocks(T * N, 256), 256, 0, stream_>>>(
        out.ptr<bf16>(), bias.ptr<bf16>(), T, N);
    TANDEM_CUDA_LAUNCHED("add_bias_kernel");
  }
}

// out [T, D] = table [V, D][ids [T]] * scale.
void CudaBackend::embedding(Tensor& out, const Tensor& table, const Tensor& ids, float scale) {
  if (table.defined() && dtype_is_block(table.dtype)) return block_embedding(*this, out, table, ids, scale);
  cuda::check_tensor(out, DType::BF16, "embedding", "out");
  cuda::check_tensor(table, DType::BF16, "embedding", "table");
  cuda::check_tensor(ids, DType::I32, "embedding", "ids");
  TANDEM_CUDA_REQUIRE(table.ndim() == 2, "embedding: table must be 2-d, got " + table.shape.str());
  const int64_t T = ids.numel(), V = table.dim(0), D = table.dim(1);
  TANDEM_CUDA_REQUIRE(out.rows() == T && out.cols() == D, "embedding: out " + out.shape.str() +
                                                              " must be [" + std::to_string(T) +
                                                              ", " + std::to_string(D) + "]");
  if (T == 0 || D == 0) return;
  const int threads = int(std::min<int64_t>(256, std::max<int64_t>(32, D / 8)));
  const bool vec = D % 8 == 0 && cuda::aligned16(table.data) && cuda::aligned16(out.data);
  cuda::launch_pdl("embedding_kernel", vec ? &embedding_kernel<true> : &embedding_kernel<false>,
                   dim3(unsigned(T)), dim3(threads), 0, stream_, out.ptr<bf16>(), table.ptr<bf16>(),
                   ids.ptr<int32_t>(), V, D, scale);
}

// out [S, D] = x [T, D][index [S]]. Any dtype, copied as raw units.
void CudaBackend::gather_rows(Tensor& out, const Tensor& x, const Tensor& index) {
  cuda::check_on_device(x, "gather_rows", "x");
  cuda::check_tensor(out, x.dtype, "gather_rows", "out");
  cuda::check_tensor(index, DType::I32, "gather_rows", "index");
  const int64_t S = index.numel(), T = x.rows(), D = x.cols();
  TANDEM_CUDA_REQUIRE(out.rows() == S && out.cols() == D, "gather_rows: out " + out.shape.str() +
                                                              " must be [" + std::to_string(S) +
                                                              ", " + std::to_string(D) + "]");
  TANDEM_CUDA_REQUIRE(out.data != x.data, "gather_rows: out may not alias x");
  const int64_t row_bytes = D * int64_t(dtype_size(x.dtype));
  if (S == 0 || row_bytes == 0) return;
  const uintptr_t addr =
      reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(out.data);
  auto launch = [&](auto unit) {
    using Unit = decltype(unit);
    const int64_t units = row_bytes / int64_t(sizeof(Unit));
    const int threads = int(std::min<int64_t>(256, std::max<int64_t>(32, units)));
    cuda::launch_pdl("gather_rows_kernel", &gather_rows_kernel<Unit>, dim3(unsigned(S)),
                     dim3(threads), 0, stream_, out.ptr<Unit>(), x.ptr<Unit>(),
                     index.ptr<int32_t>(), T, units);
  };
  if (row_bytes % 16 == 0 && addr % 16 == 0)
    launch(uint4{});
  else if (row_bytes % 4 == 0 && addr % 4 == 0)
    launch(uint32_t{});
  else if (row_bytes % 2 == 0 && addr % 2 == 0)
    launch(uint16_t{});
  else
    launch(uint8_t{});
}

}  // namespace tandem
