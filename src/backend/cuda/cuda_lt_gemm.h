// The CUDA backend's one cuBLASLt layer: a "TN" GEMM described by a key (types, shape,
// alignments, bias, scales, accumulation), its descriptors, and one algorithm cache, for
// the bf16 linears (cuda_linear.cu) and the FP8 ones (cuda_linear_fp8.cu). Host code.
//
// Column-major terms, as cuBLASLt sees a row-major linear out [T, N] = x [T, K] · w [N, K]ᵀ:
// out is D (m x n, ld m), w is A (k x m, op T), x is B (k x n): m = N, n = T, k = K.
//
// How an algorithm is chosen, once per key (a lookup afterwards):
//   - bf16: the heuristic's first algorithm, with the operands' alignments as preferences;
//   - e4m3: the fastest of the heuristic's candidates, timed on the call's own buffers,
//     for steps of at most kLtTunedMaxRows rows outside graph capture (decode steps and
//     the graphs' sizes: the first guess for e4m3 with outer-vector scales ran the o and
//     down projections of a 256-row step slower than bf16, bench/RESULTS.md); longer steps
//     (prefill, many distinct sizes) and captured ones take the first guess.
// An algorithm cuBLASLt refuses at run time is forgotten: the key runs no cuBLASLt GEMM
// from then on and the caller takes its fallback.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <tuple>

namespace tandem::cuda {

inline constexpr int64_t kLtTunedMaxRows = 512;

// What the descriptors and the algorithm choice depend on.
struct LtGemmKey {
  int device = 0;
  int64_t m = 0, n = 0, k = 0;
  cudaDataType_t ab_type = CUDA_R_16BF;   // A and B: CUDA_R_16BF or CUDA_R_8F_E4M3
  cudaDataType_t out_type = CUDA_R_16BF;  // D: CUDA_R_16BF or CUDA_R_32F (no rounding)
  // The operands' alignments (lt_alignment_of) as heuristic preferences; 0: none given.
  uint32_t align_a = 0, align_b = 0, align_c = 0;
  bool bias = false;          // a bf16 bias [m] added in the epilogue
  bool outer_scales = false;  // OUTER_VEC_32F scales: a_scale [m] on A, b_scale [n] on B
  bool fast_accum = false;    // CUBLASLT_MATMUL_DESC_FAST_ACCUM

  auto tie() const {
    return std::tie(device, m, n, k, ab_type, out_type, align_a, align_b, align_c, bias,
                    outer_scales, fast_accum);
  }
  bool operator<(const LtGemmKey& o) const { return tie() < o.tie(); }
};

// The buffers of one call (device pointers).
struct LtGemmOperands {
  const void* a;                   // w
  const void* b;                   // x (or its e4m3 copy)
  void* d;                         // out
  const void* bias = nullptr;      // [m] bf16, with key.bias
  const float* a_scale = nullptr;  // [m] f32, with key.outer_scales
  const float* b_scale = nullptr;  // [n] f32, with key.outer_scales
};

// The handle, stream and workspace (CudaAllocator::kWorkspaceBytes) a GEMM runs with.
struct LtContext {
  cublasLtHandle_t lt;
  cudaStream_t stream;
  void* workspace;
};

// D = op_T(A) · B (+ bias) on `ctx`'s stream with the algorithm chosen for `key` (above).
// False when cuBLASLt has no algorithm for it or refuses the chosen one before launching
// (nothing ran; the caller falls back); any other cuBLASLt error throws, naming `what`.
bool run_lt_gemm(const LtContext& ctx, const LtGemmKey& key, const LtGemmOperands& ops,
                 const char* what);

// The largest power of two (<= 256) that `p`'s address is a multiple of (0 counts as 256).
uint32_t lt_alignment_of(const void* p);

}  // namespace tandem::cuda
