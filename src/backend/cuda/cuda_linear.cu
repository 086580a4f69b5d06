// Row-moving and row-mixing ops on CUDA: linear (cuBLASLt, bf16 in/out, f32 compute, bias
// in the epilogue), embedding lookup, row gather.
//
// linear in column-major terms: row-major out [T, N] is column-major C (N x T), x [T, K] is
// column-major (K x T), w [N, K] is column-major (K x N); so C = op(W) · X with op = T:
// m = N, n = T, k = K, lda = ldb = K, ldc = N.
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_linear.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemv.h"
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

// ---------------------------------------------------------------- cuBLASLt plan

// Largest power of two (<= 256) the address is a multiple of.
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a == 0) return 256;
  const uintptr_t low = a & (~a + 1);
  return uint32_t(low < 256 ? low : 256);
}

// What the heuristic's answer depends on.
struct GemmKey {
  int device;
  int64_t m, n, k;
  uint32_t align_a, align_b, align_c;
  bool bias;
  bool out_f32;  // f32 output (logits, router scores): no rounding to bf16 after the sum
  bool operator<(const GemmKey& o) const {
    return std::tie(device, m, n, k, align_a, align_b, align_c, bias, out_f32) <
           std::tie(o.device, o.m, o.n, o.k, o.align_a, o.align_b, o.align_c, o.bias, o.out_f32);
  }
};

// The descriptors of one bf16 "TN" GEMM; destroyed with the object.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;

  LtGemm(const GemmKey& key, const void* bias) {
    cublas_check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "linear: cublasLtMatmulDescCreate");
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans));
    if (bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16BF;
      set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
    }
    layout(&a, key.k, key.m, CUDA_R_16BF);  // w, stored K x N
    layout(&b, key.k, key.n, CUDA_R_16BF);  // x, stored K x T
    layout(&c, key.m, key.n, key.out_f32 ? CUDA_R_32F : CUDA_R_16BF);  // out, stored N x T
  }
  ~LtGemm() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void set(cublasLtMatmulDescAttributes_t attr, const void* value, size_t size) {
    cublas_check(cublasLtMatmulDescSetAttribute(desc, attr, value, size),
                 "linear: cublasLtMatmulDescSetAttribute");
  }
  static void layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, cudaDataType_t type) {
    cublas_check(cublasLtMatrixLayoutCreate(l, type, uint64_t(rows), uint64_t(cols), rows),
                 "linear: cublasLtMatrixLayoutCreate");
  }
};

// cuBLASLt's algorithm for a shape, or none (then cublasGemmEx runs it).
struct AlgoChoice {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};

// Choices per shape and alignment: the heuristic costs tens of microseconds, a lookup less.
struct AlgoCache {
  std::mutex mutex;
  std::map<GemmKey, AlgoChoice> algos;
};

AlgoCache& algo_cache() {
  static AlgoCache cache;
  return cache;
}

// The heuristic's first algorithm for `key`, if cuBLASLt has one.
AlgoChoice find_algo(cublasLtHandle_t lt, const GemmKey& key, const LtGemm& gemm) {
  AlgoCache& cache = algo_cache();
  std::lock_guard lock(cache.mutex);
  if (auto it = cache.algos.find(key); it != cache.algos.end()) return it->second;
  cublasLtMatmulPreference_t pref = nullptr;
  cublas_check(cublasLtMatmulPreferenceCreate(&pref), "linear: cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = CudaAllocator::kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof(workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}};
  for (const auto& [attr, value] : aligns)
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt, gemm.desc, gemm.a, gemm.b, gemm.c, gemm.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  AlgoChoice choice;
  if (status == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS)
    choice = {true, result.algo};
  cache.algos.emplace(key, choice);
  return choice;
}

// After cuBLASLt refused the heuristic's choice at run time: use cublasGemmEx from now on.
void forget_algo(const GemmKey& key) {
  AlgoCache& cache = algo_cache();
  std::lock_guard lock(cache.mutex);
  cache.algos[key] = AlgoChoice{};
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
  const GemmKey key{
      device_,       N, T, K, alignment_of(w.data), alignment_of(x.data), alignment_of(out.data),
      bias.defined(), out_f32};
  const float alpha = 1.f, beta = 0.f;
  if (!bias.defined() || lt_bias) {
    LtGemm gemm(key, bias.defined() ? bias.data : nullptr);
    const AlgoChoice choice = find_algo(cublas_lt_, key, gemm);
    if (choice.found) {
      const cublasStatus_t status =
          cublasLtMatmul(cublas_lt_, gemm.desc, &alpha, w.data, gemm.a, x.data, gemm.b, &beta,
                         out.data, gemm.c, out.data, gemm.c, &choice.algo, allocator_->workspace(),
                         CudaAllocator::kWorkspaceBytes, stream_);
      if (status == CUBLAS_STATUS_SUCCESS) return;
      // Refused before launching anything: fall back below.
      if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE)
        cublas_check(status, "linear: cublasLtMatmul");
      forget_algo(key);
    }
  }
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
