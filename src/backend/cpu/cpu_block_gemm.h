// The CPU backend's products with ggml block-type weights (GGUF's Q4_0 … Q6_K, IQ4_NL,
// IQ4_XS; core/ggml_blocks.h), the weights read in their blocks, never expanded in memory.
// Two arithmetics:
//   Exact: the reference. Each weight is decoded in registers to the f32 value ggml's
//     dequantize_row gives and meets f32 activations in f32 sums, in the f32 GEMM tile's
//     order: every output has the bits of gemm_xwt (cpu_gemm.h) over the decoded weights.
//     From kExactWidenRows rows on, a slice of weight rows (in L2) is decoded once into f32
//     and the GEMM tile itself runs over it: the same values, the same order, the same bits.
//   Int8: llama.cpp's arithmetic. The activations are quantized per block to 8 bits (blocks
//     of 32 for the 32-value types, as ggml's Q8_0; of 256 for the k-quants and IQ4_XS, as
//     Q8_K) and the products are integer dot products (vpdpbusd where the CPU has AVX-512
//     VNNI, vpmaddubsw otherwise) under the weights' own scales. It is exact against its own
//     twin: the f64 product of the weights and the quantized activations (tests/unit/backend/
//     cpu_block_gemm_test.cpp), ~1e-2 from the exact one on real models.
//     With panels (cpu_block_panels.h: 16 weight rows interleaved, packed once at upload) the
//     Int8 product runs the panel kernels: one vpdpbusd makes 4 products for each of 16 rows,
//     a block's scales apply to 16 rows at once, and the activations are quantized once per
//     call for all of them.
// Both read the weights once per call whatever the number of rows, spread weight rows over
// the pool, and compute each output in a fixed order: the bits do not depend on the number of
// rows or threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

enum class BlockArithmetic : uint8_t { Exact, Int8 };

// What the CPU backend runs unless told otherwise (CpuBackend::set_block_arithmetic).
constexpr BlockArithmetic kDefaultBlockArithmetic = BlockArithmetic::Int8;

std::string_view block_arithmetic_name(BlockArithmetic a);  // "exact", "int8"
std::optional<BlockArithmetic> block_arithmetic_from_name(std::string_view name);

// out [M, N] = x [M, K] · W'ᵀ, W' the values of w [N, K] of the block type t (K a whole number
// of its blocks), under arithmetic a with the kernels of `isa`. `panels`: w's panels
// (pack_block_panels), or null; Int8 reads them for rows [0, 16·⌊N / 16⌋) (the rest, and every
// row without them, through the row kernels). Exact ignores them.
void block_gemm_xwt(ThreadPool& pool, float* out, const float* x, const void* w, DType t, int64_t M,
                    int64_t N, int64_t K, BlockArithmetic a, CpuIsa isa = cpu_isa(),
                    const void* panels = nullptr);

// Whether t has panels (cpu_block_panels.h; all but Q2_K and Q3_K), their bytes for a [N, K]
// weight (⌊N / 16⌋ panels; 0 where t has none), and w's panels packed into dst (64-byte
// aligned, block_panels_bytes of it), spread over the pool.
bool block_panels_supported(DType t);
size_t block_panels_bytes(DType t, int64_t N, int64_t K);
void pack_block_panels(ThreadPool& pool, DType t, const void* w, int64_t N, int64_t K, void* dst);
// Rows [r0, r1) of the panels of a [N, K] weight of type t (r1 ≤ 16·⌊N / 16⌋) as f32 into out
// [r1 − r0, K]: each value fl(fl(d·sc)·(u − o)) + fl(dm·mn), which is dequantize_row's value of
// the blocks they were packed from, bit for bit (the panels keep every level, integer scale and
// the f16 scales as f32).
void unpack_block_panels_f32(DType t, const void* panels, int64_t K, int64_t r0, int64_t r1,
                             float* out);

// The rows at which Exact decodes weight slices once instead of per group of x rows.
int64_t exact_widen_rows(CpuIsa isa);

// x [M, K] quantized as the Int8 kernels quantize it (cpu_block_kernels.h, BlockActs): per
// block of act_block values d = max|x| / 127 and q = round(x / d) (half away from zero), and
// xs = d · Σ q per 16. The tests build the integer product's twin from it.
struct QuantizedActs {
  int64_t act_block = 32;
  std::vector<int8_t> q;  // [M, K]
  std::vector<float> d;   // [M, K / act_block]
  std::vector<float> xs;  // [M, K / 16]
};
void quantize_block_acts(ThreadPool& pool, const float* x, int64_t M, int64_t K, int64_t act_block,
                         QuantizedActs& out);
// The activation block the Int8 product of weight type t uses: 32 or 256.
int64_t block_act_elems(DType t);

// Whether the Int8 product runs the VNNI kernels on `isa` (AVX-512 with VNNI), else AVX2's.
bool block_int8_uses_vnni(CpuIsa isa);

}  // namespace tandem::cpu
