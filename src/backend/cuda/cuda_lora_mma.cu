// LoRA's two products on the tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate), for
// the shapes every real projection has (K a multiple of 32; N, the shard ends a multiple of
// 16; ranks a multiple of 4). cuda_lora.cu keeps the CUDA-core kernels for the rest.
//
// Why: the CUDA-core kernels widened every bf16 of A, B and x to f32 once per token and per
// rank, and a block did a few hundred FMAs between its dependent loads; at 64 decode tokens
// an 8B layer's four projections spent 60 µs in them, 1.9 ms a step (Nsight Compute: the
// shrink issue-bound at 64% of its slots, the expand latency-bound at one eligible warp).
// Here a block takes 8 sorted adapter tokens, the mma's 8 columns, and one mma covers 16
// ranks (shrink) or 16 output columns (expand) of all of them: 49.2 µs. Both kernels then
// load what needs no earlier kernel (the tile record, their rows of A or B) before the PDL
// wait, under the tail of the kernel before: 37.2 µs (bench/RESULTS.md).
//
// A tile never holds two adapters (LoraRows::tiles cuts each adapter's run of order into
// tiles of at most 8, on the host), so a block reads one A and one B, and one token per
// adapter costs a block with one real column, as the CUDA-core kernels' blocks did. Masking
// the tokens of other adapters inside a shared tile instead would cost a pass per adapter:
// with 8 decode tokens on 8 adapters that made a layer's products 3.7x slower (158 µs). A token's sums
// never depend on the tokens beside it: its tile's other columns only feed their own.
//
// The k order inside an mma is free (it sums its 16 k slots), so a lane loads contiguous
// bytes of a row and the matching bytes of x, and both operands give the same slot to
// each k (the PTX fragments of m16n8k16: lane = 4g + c holds k 2c, 2c+1, 2c+8, 2c+9):
//   shrink: lane c's 8 columns 8c..8c+7 of a 32-column chunk feed two mmas, 8c..8c+3 the
//           first ({2c, 2c+1} <- 8c, 8c+1; {2c+8, 2c+9} <- 8c+2, 8c+3), 8c+4.. the second;
//   expand: lane c's ranks 4c..4c+3 of a 16-rank step, likewise.
// v, the sum between the products, stays f32 as on the CPU: the expand feeds it as two
// bf16 parts (v = hi + lo, two mmas), which keeps 16 of its bits instead of 8.
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_lora.h"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem::cuda {

namespace {

constexpr int kTile = kLoraTile;   // sorted adapter tokens per block: the mma's 8 columns
constexpr int kChunk = 32;         // shrink: K columns per lane group and step (8 a lane)
constexpr int kShrinkWarps = 8;    // each takes 2 chunks of the block's slice
constexpr int kRankGroup = 64;     // shrink: ranks per block, 4 m-tiles
constexpr int kExpandWarps = 4;
constexpr int kExpandTilesN = 4;   // expand: m-tiles (16 output columns) per warp; 8 was
                                   // slower at every size (qkv 15.5 against 13.0 µs at 64)
constexpr int kExpandCols = kExpandWarps * kExpandTilesN * 16;
constexpr int kMaxRank = 1024;     // the expand's v tile [kTile, R] f32 in shared memory
static_assert(kLoraMmaSliceK == kShrinkWarps * 2 * kChunk, "a warp takes two chunks");

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// v's two bf16 parts: hi = bf16(v), lo = bf16(v - hi), packed in pairs.
__device__ __forceinline__ void split_pair(float v0, float v1, uint32_t& hi, uint32_t& lo) {
  hi = bf16_pair(v0, v1);
  const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&hi);
  lo = bf16_pair(v0 - __low2float(h), v1 - __high2float(h));
}

// Block b's tile (LoraRows::tiles): `rows` sorted adapter tokens from position `begin` of
// order, all of adapter `slot`; rows = 0: past the step's tiles. The record carries the
// slot and the tokens, so a block's first loads of A, B and x wait on one load, not three.
struct Tile {
  int begin, rows, slot;
  const int32_t* tokens;  // kTile of them, the last real one repeated past rows
};

__device__ __forceinline__ Tile block_tile(const LoraTokens& tk, int b) {
  const int32_t* rec = tk.tiles + 1 + int64_t(b) * kLoraTileInts;
  const int count = tk.tiles[0];
  if (b >= count) return {0, 0, 0, rec};
  const int entry = rec[0];
  return {entry / kTile, entry % kTile + 1, rec[1], rec + 2};
}

// grid (tiles, ⌈R / 64⌉, ⌈K / 512⌉). Block (bx, by, z): ranks [64·by, 64·by + 64) of tile
// bx's tokens over K slice z; warp w its chunks 2w, 2w + 1, the 8 warps' sums added in warp
// order through shared memory. p [parts, T, R].
__global__ void __launch_bounds__(kShrinkWarps * 32)
    lora_shrink_mma_kernel(float* __restrict__ p, const bf16* __restrict__ x,
                           const bf16* __restrict__ a, LoraTokens tk, int R, int64_t K) {
  __shared__ float red[kShrinkWarps][kTile][kRankGroup];
  pdl_launch_next();
  // The tile (step metadata) and the warp's rows of A (weights) need nothing an earlier
  // kernel writes: they are loaded before the wait, under the kernel before this one.
  const Tile tile = block_tile(tk, int(blockIdx.x));
  const int begin = tile.begin, rows = tile.rows;
  if (rows == 0) {  // the whole block leaves together, before the barrier
    pdl_wait();
    return;
  }
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, c = lane & 3;
  const int token = tile.tokens[g];
  const int r_base = int(blockIdx.y) * kRankGroup;
  const int64_t k_warp = int64_t(blockIdx.z) * kLoraMmaSliceK + warp * 2 * kChunk;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 ua[2][4], ub[2][4];
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int mt = 0; mt < 4; mt++) {
      const int r = r_base + mt * 16 + g;
      const int64_t kc = k_warp + h * kChunk;
      const bool live = kc < K && r_base + mt * 16 < R;  // warp-uniform: K % 32 == 0
      const bf16* row = a + (int64_t(tile.slot) * R + r) * K + kc + 8 * c;
      ua[h][mt] = live && r < R ? *reinterpret_cast<const uint4*>(row) : zero;
      ub[h][mt] = live && r + 8 < R ? *reinterpret_cast<const uint4*>(row + 8 * K) : zero;
    }
  pdl_wait();
  uint4 xv[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int64_t k = k_warp + h * kChunk + 8 * c;
    xv[h] = k < K && g < rows ? *reinterpret_cast<const uint4*>(x + int64_t(token) * K + k) : zero;
  }
  float d[4][4] = {};
#pragma unroll
  for (int h = 0; h < 2; h++) {
    if (k_warp + h * kChunk >= K) continue;  // warp-uniform
#pragma unroll
    for (int mt = 0; mt < 4; mt++) {
      if (r_base + mt * 16 >= R) continue;  // warp-uniform
      mma_bf16(d[mt], ua[h][mt].x, ub[h][mt].x, ua[h][mt].y, ub[h][mt].y, xv[h].x, xv[h].y);
      mma_bf16(d[mt], ua[h][mt].z, ub[h][mt].z, ua[h][mt].w, ub[h][mt].w, xv[h].z, xv[h].w);
    }
  }
  // d[mt]: ranks mt·16 + g (j < 2) and + 8 (j >= 2), positions 2c and 2c + 1.
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int j = 0; j < 4; j++) red[warp][2 * c + (j & 1)][mt * 16 + g + (j >> 1) * 8] = d[mt][j];
  __syncthreads();
  for (int e = int(threadIdx.x); e < kTile * kRankGroup; e += kShrinkWarps * 32) {
    const int i = e / kRankGroup, r = e % kRankGroup;
    if (i >= rows || r_base + r >= R) continue;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kShrinkWarps; w++) s += red[w][i][r];
    p[(int64_t(blockIdx.z) * tk.T + begin + i) * R + r_base + r] = s;
  }
}

// grid (⌈N / 256⌉, tiles), dynamic shared memory 8·R floats. The block sums the shrink's
// parts of its tile's v (in part order, its shards' ranks) into shared memory; warp w then takes output columns
// [256·bx + 64·w, +64) as four m-tiles of 16, each inside one shard (the shard ends are
// multiples of 16), over that shard's ranks in steps of 16. Each (token, column) has one
// writer.
__global__ void __launch_bounds__(kExpandWarps * 32)
    lora_expand_mma_kernel(bf16* __restrict__ out, const float* __restrict__ p, int parts,
                           const bf16* __restrict__ b, LoraTokens tk, int R, int64_t N,
                           LoraShards shards) {
  extern __shared__ __align__(16) float vs[];  // [kTile, R]
  pdl_launch_next();
  // The tile (step metadata) and each m-tile's rows of B for its shard's first 16 ranks
  // (weights; rows n0 + g and n0 + g + 8) are loaded before the wait, under the kernel
  // before this one; the outputs this lane adds to (the base GEMM's) after it.
  const Tile tile = block_tile(tk, int(blockIdx.y));
  const int begin = tile.begin, rows = tile.rows;
  if (rows == 0) {  // the whole block leaves together, before the barrier
    pdl_wait();
    return;
  }
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, c = lane & 3;
  // The tokens of positions 2c and 2c + 1, whose outputs this lane holds.
  const int tok[2] = {tile.tokens[2 * c], tile.tokens[2 * c + 1]};
  const int64_t n_warp = int64_t(blockIdx.x) * kExpandCols + warp * kExpandTilesN * 16;
  const uint2 zero = make_uint2(0, 0);
  const bf16* brow[kExpandTilesN];
  int r0[kExpandTilesN];
  uint2 b0[kExpandTilesN][2];
#pragma unroll
  for (int mt = 0; mt < kExpandTilesN; mt++) {
    const int64_t n0 = min(n_warp + mt * 16, N - 16);
    int shard = 0;
    while (shard + 1 < shards.count && n0 >= shards.ends[shard]) shard++;
    r0[mt] = shard * shards.rank;
    brow[mt] = b + (int64_t(tile.slot) * N + n0 + g) * R + r0[mt];
    const bool in = 4 * c < shards.rank;
    b0[mt][0] = in ? *reinterpret_cast<const uint2*>(brow[mt] + 4 * c) : zero;
    b0[mt][1] = in ? *reinterpret_cast<const uint2*>(brow[mt] + 8 * R + 4 * c) : zero;
  }
  pdl_wait();
  float y[kExpandTilesN][4];
#pragma unroll
  for (int mt = 0; mt < kExpandTilesN; mt++)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int64_t n = min(n_warp + mt * 16 + g + (j >> 1) * 8, N - 1);
      y[mt][j] = to_f32(out[int64_t(tok[j & 1]) * N + n]);
    }
  // v = Σ_z p[z], in part order, for the ranks of the shards the block's columns lie in (one
  // shard of a fused q|k|v or gate|up: a third or half of the sums to read). (All of down's
  // 28 parts' loads in flight at once instead of 8 saved 1.8 µs there but cost gate_up, whose
  // 112 column blocks each redo this, 7 µs.)
  const int64_t n_first = int64_t(blockIdx.x) * kExpandCols;
  const int64_t n_last = min(n_first + kExpandCols, N) - 1;
  int shard_lo = 0, shard_hi = 0;
  while (shard_lo + 1 < shards.count && n_first >= shards.ends[shard_lo]) shard_lo++;
  while (shard_hi + 1 < shards.count && n_last >= shards.ends[shard_hi]) shard_hi++;
  const int r_lo = shard_lo * shards.rank, width = (shard_hi + 1 - shard_lo) * shards.rank;
  for (int e = int(threadIdx.x); e < rows * width; e += kExpandWarps * 32) {
    const int idx = (e / width) * R + r_lo + e % width;
    float s = 0.f;
#pragma unroll 8
    for (int z = 0; z < parts; z++) s += p[(int64_t(z) * tk.T + begin) * R + idx];
    vs[idx] = s;
  }
  __syncthreads();
  float d[kExpandTilesN][4] = {};
#pragma unroll
  for (int mt = 0; mt < kExpandTilesN; mt++) {
    if (n_warp + mt * 16 >= N) continue;  // warp-uniform: N % 16 == 0
    for (int kk = 0; kk < shards.rank; kk += 16) {
      const int r = kk + 4 * c;
      const bool in = r < shards.rank;  // the rank's last step may be partial (rank % 4 == 0)
      const uint2 ua = kk == 0 ? b0[mt][0] : in ? *reinterpret_cast<const uint2*>(brow[mt] + r) : zero;
      const uint2 ub =
          kk == 0 ? b0[mt][1] : in ? *reinterpret_cast<const uint2*>(brow[mt] + 8 * R + r) : zero;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (in && g < rows) v = *reinterpret_cast<const float4*>(vs + g * R + r0[mt] + r);
      uint32_t hi0, lo0, hi1, lo1;
      split_pair(v.x, v.y, hi0, lo0);
      split_pair(v.z, v.w, hi1, lo1);
      mma_bf16(d[mt], ua.x, ub.x, ua.y, ub.y, hi0, hi1);
      mma_bf16(d[mt], ua.x, ub.x, ua.y, ub.y, lo0, lo1);
    }
  }
  // d[mt]: columns n0 + g (j < 2) and + 8 (j >= 2), positions 2c and 2c + 1.
#pragma unroll
  for (int mt = 0; mt < kExpandTilesN; mt++)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int64_t n = n_warp + mt * 16 + g + (j >> 1) * 8;
      if (2 * c + (j & 1) < rows && n < N)
        out[int64_t(tok[j & 1]) * N + n] = __float2bfloat16_rn(y[mt][j] + d[mt][j]);
    }
}

}  // namespace

bool lora_mma_shrink_fits(int64_t K, const void* x, const void* a) {
  return K % kChunk == 0 && aligned16(x) && aligned16(a);
}

void launch_lora_mma_shrink(cudaStream_t stream, float* p, const bf16* x, const bf16* a,
                            const LoraTokens& tokens, int R, int64_t K) {
  const dim3 grid(unsigned(tokens.max_tiles), unsigned(ceil_div(R, kRankGroup)),
                  unsigned(ceil_div(K, kLoraMmaSliceK)));
  launch_pdl("lora_shrink_mma kernel", &lora_shrink_mma_kernel, grid, dim3(kShrinkWarps * 32), 0,
             stream, p, x, a, tokens, R, K);
}

bool lora_mma_expand_fits(int64_t N, int R, const LoraShards& shards, const void* b) {
  bool ok = N % 16 == 0 && R % 4 == 0 && shards.rank % 4 == 0 && R <= kMaxRank &&
            reinterpret_cast<uintptr_t>(b) % 8 == 0;
  for (int j = 0; ok && j < shards.count; j++) ok = shards.ends[j] % 16 == 0;
  return ok;
}

void launch_lora_mma_expand(cudaStream_t stream, bf16* out, const float* p, int parts,
                            const bf16* b, const LoraTokens& tokens, int R, int64_t N,
                            const LoraShards& shards) {
  const dim3 grid(unsigned(ceil_div(N, kExpandCols)), unsigned(tokens.max_tiles));
  launch_pdl("lora_expand_mma kernel", &lora_expand_mma_kernel, grid, dim3(kExpandWarps * 32),
             size_t(kTile) * size_t(R) * sizeof(float), stream, out, p, parts, b, tokens, R, N,
             shards);
}

}  // namespace tandem::cuda
