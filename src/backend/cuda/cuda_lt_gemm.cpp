// cuBLASLt GEMMs: descriptors per call, one algorithm cache (cuda_lt_gemm.h).
#include "backend/cuda/cuda_lt_gemm.h"

#include <map>
#include <mutex>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"

namespace tandem::cuda {

namespace {

// The descriptors of one GEMM; destroyed with the object.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::string what;

  LtGemm(const LtGemmKey& key, const LtGemmOperands& ops, const char* what_) : what(what_) {
    check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "cublasLtMatmulDescCreate");
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans));
    if (key.fast_accum) {
      const int8_t fast = 1;
      set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
    }
    if (key.bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bias_type = CUDA_R_16BF;
      set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ops.bias, sizeof(ops.bias));
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
    }
    if (key.outer_scales) {
      const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode));
      set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode));
      set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ops.a_scale, sizeof(ops.a_scale));
      set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &ops.b_scale, sizeof(ops.b_scale));
    }
    layout(&a, key.k, key.m, key.ab_type);   // w, stored K x N
    layout(&b, key.k, key.n, key.ab_type);   // x, stored K x T
    layout(&c, key.m, key.n, key.out_type);  // out, stored N x T
  }
  ~LtGemm() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void check(cublasStatus_t status, const char* call) const {
    cublas_check(status, (what + ": " + call).c_str());
  }
  void set(cublasLtMatmulDescAttributes_t attr, const void* value, size_t size) {
    check(cublasLtMatmulDescSetAttribute(desc, attr, value, size),
          "cublasLtMatmulDescSetAttribute");
  }
  void layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, cudaDataType_t type) {
    check(cublasLtMatrixLayoutCreate(l, type, uint64_t(rows), uint64_t(cols), rows),
          "cublasLtMatrixLayoutCreate");
  }
};

// cuBLASLt's algorithm for a key, or none (then the caller's fallback runs).
struct AlgoChoice {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};

// Choices per key: the heuristic costs tens of microseconds (the timing far more), a
// lookup less.
struct AlgoCache {
  std::mutex mutex;
  std::map<LtGemmKey, AlgoChoice> algos;
};

AlgoCache& algo_cache() {
  static AlgoCache cache;
  return cache;
}

constexpr int kCandidates = 16;

// Up to `wanted` of the heuristic's algorithms for `gemm`, best guess first: the count
// written to `out`. (A fixed array: nvcc 13's front end failed on std::vector of these C
// structs.)
int candidate_algos(cublasLtHandle_t lt, const LtGemmKey& key, const LtGemm& gemm, int wanted,
                    cublasLtMatmulAlgo_t (&out)[kCandidates]) {
  cublasLtMatmulPreference_t pref = nullptr;
  gemm.check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = CudaAllocator::kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof(workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}};
  for (const auto& [attr, value] : aligns)
    if (value != 0) cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value));
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt, gemm.desc, gemm.a, gemm.b, gemm.c, gemm.c, pref, wanted, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS) return 0;
  int n = 0;
  for (int i = 0; i < found && i < wanted; i++)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) out[n++] = results[i].algo;
  return n;
}

cublasStatus_t matmul(const LtContext& ctx, const LtGemm& gemm, const LtGemmOperands& ops,
                      const cublasLtMatmulAlgo_t& algo) {
  const float alpha = 1.f, beta = 0.f;
  return cublasLtMatmul(ctx.lt, gemm.desc, &alpha, ops.a, gemm.a, ops.b, gemm.b, &beta, ops.d,
                        gemm.c, ops.d, gemm.c, &algo, ctx.workspace, CudaAllocator::kWorkspaceBytes,
                        ctx.stream);
}

// Milliseconds of the fastest of 3 runs of `algo`, or a negative number when it does not run.
float time_algo(const LtContext& ctx, const LtGemm& gemm, const LtGemmOperands& ops,
                const cublasLtMatmulAlgo_t& algo, cudaEvent_t start, cudaEvent_t stop) {
  if (matmul(ctx, gemm, ops, algo) != CUBLAS_STATUS_SUCCESS) return -1.f;  // warm-up; unfit
  float ms = -1.f;
  for (int r = 0; r < 3; r++) {
    cuda_check(cudaEventRecord(start, ctx.stream), "cuBLASLt timing: cudaEventRecord");
    if (matmul(ctx, gemm, ops, algo) != CUBLAS_STATUS_SUCCESS) break;
    cuda_check(cudaEventRecord(stop, ctx.stream), "cuBLASLt timing: cudaEventRecord");
    cuda_check(cudaEventSynchronize(stop), "cuBLASLt timing: cudaEventSynchronize");
    float t = 0.f;
    cuda_check(cudaEventElapsedTime(&t, start, stop), "cuBLASLt timing: cudaEventElapsedTime");
    if (ms < 0.f || t < ms) ms = t;
  }
  return ms;
}

// The choice for `key` (cuda_lt_gemm.h): the first candidate, or for e4m3 the fastest.
AlgoChoice pick_algo(const LtContext& ctx, const LtGemmKey& key, const LtGemm& gemm,
                     const LtGemmOperands& ops) {
  const bool tuned = key.ab_type == CUDA_R_8F_E4M3;
  cublasLtMatmulAlgo_t algos[kCandidates];
  const int num_algos = candidate_algos(ctx.lt, key, gemm, tuned ? kCandidates : 1, algos);
  if (num_algos == 0) return AlgoChoice{};
  AlgoChoice best{true, algos[0]};
  if (num_algos == 1 || key.n > kLtTunedMaxRows) return best;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(ctx.stream, &capture), "cuBLASLt: cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) return best;  // the runner warms graphs up first
  cudaEvent_t start, stop;
  cuda_check(cudaEventCreate(&start), "cuBLASLt timing: cudaEventCreate");
  cuda_check(cudaEventCreate(&stop), "cuBLASLt timing: cudaEventCreate");
  float best_ms = -1.f;
  for (int i = 0; i < num_algos; i++) {
    const float ms = time_algo(ctx, gemm, ops, algos[i], start, stop);
    if (ms >= 0.f && (best_ms < 0.f || ms < best_ms)) {
      best.algo = algos[i];
      best_ms = ms;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

AlgoChoice find_algo(const LtContext& ctx, const LtGemmKey& key, const LtGemm& gemm,
                     const LtGemmOperands& ops) {
  AlgoCache& cache = algo_cache();
  std::lock_guard lock(cache.mutex);
  if (auto it = cache.algos.find(key); it != cache.algos.end()) return it->second;
  const AlgoChoice choice = pick_algo(ctx, key, gemm, ops);
  cache.algos.emplace(key, choice);
  return choice;
}

// After cuBLASLt refused the cached choice at run time: no cuBLASLt GEMM for `key` again.
void forget_algo(const LtGemmKey& key) {
  AlgoCache& cache = algo_cache();
  std::lock_guard lock(cache.mutex);
  cache.algos[key] = AlgoChoice{};
}

}  // namespace

uint32_t lt_alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a == 0) return 256;
  const uintptr_t low = a & (~a + 1);
  return uint32_t(low < 256 ? low : 256);
}

bool run_lt_gemm(const LtContext& ctx, const LtGemmKey& key, const LtGemmOperands& ops,
                 const char* what) {
  LtGemm gemm(key, ops, what);
  const AlgoChoice choice = find_algo(ctx, key, gemm, ops);
  if (!choice.found) return false;
  const cublasStatus_t status = matmul(ctx, gemm, ops, choice.algo);
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  // Refused before launching anything: the caller falls back.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE)
    gemm.check(status, "cublasLtMatmul");
  forget_algo(key);
  return false;
}

}  // namespace tandem::cuda
