// The contract between cpu_attention.cpp and its per-ISA tile kernels
// (cpu_attention_avx2.cpp, cpu_attention_avx512.cpp; one template, cpu_attention_tile.h).
// Plain data only, as cpu_gemm_kernels.h: the AVX-512 file is compiled with wider flags.
//
// A job is the queries of some tokens of one row that share one kv head (the tokens' query
// heads of that GQA group). It walks the row's keys in tiles, loading each tile once for
// all its queries, with an online softmax: per query a running max m, a running
// denominator l and the running weighted sum of values in its output row. What a query
// computes depends only on its own q, the keys and values it sees and the tile bounds,
// which are fixed by key position (kAttnTileKeys and the cache block size), never by the
// other queries of its job: so a token's output is the same bits in a prefill chunk, in a
// decode step and beside any other rows, on any thread count and on either instruction
// set (the arithmetic, cpu_attention_tile.h, is the same lane by lane on both).
#pragma once

#include <cstdint>

namespace tandem::cpu {

// Keys per tile. A tile never crosses a multiple of this position or a cache block.
constexpr int64_t kAttnTileKeys = 16;

// The queries of one job. Query i sees the keys at positions lo[i] .. hi[i] (hi: its own
// position, or the last key of its image when it sees its image both ways).
struct AttnQueries {
  const float* const* q = nullptr;  // [num] query rows, each [Dh]
  float* const* out = nullptr;      // [num] output rows, each [Dh]: the running sum, then the output
  const int64_t* hi = nullptr;      // [num]
  const int64_t* lo = nullptr;      // [num]
  float* m = nullptr;               // [num] largest score so far (-inf before any)
  float* l = nullptr;               // [num] sum of exp(score - m) so far
  int64_t num = 0, Dh = 0;
  float scale = 1.f;    // score = (q · k) · scale,
  float softcap = 0.f;  // then cap · tanh(score / cap) when cap > 0
};

// Keys key0 .. key0 + n - 1 (n <= kAttnTileKeys). k[j] and v[j] are the f32 rows ([Dh])
// of key key0 + j, or a row of zeros for a key no query of the job sees and for j >= n.
struct AttnTile {
  const float* k[kAttnTileKeys];
  const float* v[kAttnTileKeys];
  int64_t key0 = 0, n = 0;
};

// Consecutive tiles of one job taken in one call: the scores of several tiles are
// independent chains, which a decode step's few queries need to keep the FMAs busy.
constexpr int64_t kAttnTilesPerCall = 4;

// Floats of scratch one attend_tiles call needs.
constexpr int64_t attn_tile_scratch(int64_t num, int64_t Dh) {
  return kAttnTilesPerCall * (Dh * kAttnTileKeys + num * (kAttnTileKeys + 1));
}

// Folds tiles[0 .. num_tiles) (num_tiles <= kAttnTilesPerCall, in key order) into every
// query's m, l and out (scratch: attn_tile_scratch floats).
void attend_tiles_avx2(const AttnQueries& a, const AttnTile* tiles, int64_t num_tiles, float* scratch);
void attend_tiles_avx512(const AttnQueries& a, const AttnTile* tiles, int64_t num_tiles,
                         float* scratch);

// out[i] /= l[i] for every query, once all its tiles are folded in.
void attend_finish_avx2(const AttnQueries& a);
void attend_finish_avx512(const AttnQueries& a);

}  // namespace tandem::cpu
