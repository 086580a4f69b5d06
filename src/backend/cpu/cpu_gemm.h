// The CPU backend's matrix products, out = x · wᵀ, with x and out in f32 and the weight
// w in its stored dtype (bf16, f16, f32, or e4m3 without its scales). A narrower weight is
// widened to f32 in registers and never copied: the products and sums are f32, so the
// result is what an f32 GEMM over the widened weight gives, up to summation order.
//
// The kernels (cpu_gemm_avx2.cpp, cpu_gemm_avx512.cpp; one tile template in
// cpu_gemm_tile.h) take weight rows in blocks that fit the L2 cache and, for each block,
// every group of up to four x rows: one pass over the weights serves every row of the
// step. Each group widens the block again in registers, which measured faster than
// widening it once into an f32 copy (89–97 against 62–85 GFLOP/s on one AVX-512 core,
// 8–512 rows of the llama-100m shapes): the copy doubles the bytes every group loads. Each output element is one thread's fixed-order dot product, the same whatever
// M, the thread count or the tile shape, so a row's result never depends on the other
// rows of the step. Blocks are spread over the thread pool.
#pragma once

#include <cstdint>
#include <optional>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

// How a call computes: its own kernels for an instruction set, or OpenBLAS sgemm over
// f32 copies of the weight blocks (the widened tiles; kept as the comparison the
// benchmark runs).
enum class GemmPath : uint8_t { Kernels, Blas };

struct GemmOptions {
  CpuIsa isa = cpu_isa();
  // nullopt: gemm_path_for(M).
  std::optional<GemmPath> path;
};

// out [M, N] = x [M, K] · w [N, K]ᵀ; w of dtype w_dtype (bf16, f16, f32 or f8e4m3), all
// row-major and contiguous.
void gemm_xwt(ThreadPool& pool, float* out, const float* x, const void* w, DType w_dtype,
              int64_t M, int64_t N, int64_t K, const GemmOptions& options = {});

// out [M, N] = x [M, K] · W'ᵀ with W' = Wq · s in f32: Wq [N, K] e4m3, s
// [⌈N / block_n⌉, ⌈K / block_k⌉] one scale per block, block_k a multiple of 32. The kernels
// multiply each widened chunk by its scale, so the result has the bits of gemm_xwt over W'
// stored in f32, without W' ever being written.
void gemm_xwt_e4m3_blocks(ThreadPool& pool, float* out, const float* x, const uint8_t* w,
                          const float* scales, int64_t block_n, int64_t block_k, int64_t M,
                          int64_t N, int64_t K, CpuIsa isa = cpu_isa());

// The path gemm_xwt takes for M rows when the options leave it open.
GemmPath gemm_path_for(int64_t M, DType w_dtype);

}  // namespace tandem::cpu
