// The paged-attention cases the CUDA tests share (cuda_attention_test.cpp, and the
// f8_e4m3 cache's cuda_kv_f8_test.cpp): a step's host arrays with shuffled block tables
// and rows of different lengths, its upload (optionally with a replayed graph's wider
// bounds), random bf16 data, and the case lists.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "../backend/step_builder.h"
#include "backend/backend.h"
#include "cuda_test_util.h"

namespace tandem::test::attention {

struct AttnCase {
  const char* name;
  int Hq, Hkv, Dh;
  AttentionParams params;
  std::vector<std::pair<int, int>> rows;  // (tokens in the cache after the step, new tokens)
  int block_size = 16;
};

// The step's host arrays: rows of new tokens at the end of their contexts, blocks drawn
// from a shuffled pool, table padding (and, with a window, blocks before every visible
// key) set to -1.
struct HostAttnStep {
  test::HostStep h;
  int num_blocks = 0, max_blocks = 0, max_context = 0;
};

inline HostAttnStep make_host_step(const AttnCase& c, std::mt19937& rng) {
  int num_blocks = 5;  // a few blocks no row owns
  for (auto [ctx, n] : c.rows) num_blocks += (ctx + c.block_size - 1) / c.block_size;
  const std::vector<int32_t> ids = test::shuffled_ids(rng, num_blocks);
  std::vector<test::RowSpec> specs;
  size_t next = 0;
  for (auto [ctx, n] : c.rows) {
    const size_t nb = size_t((ctx + c.block_size - 1) / c.block_size);
    specs.push_back(
        test::row_range(ctx - n, n, {ids.begin() + long(next), ids.begin() + long(next + nb)}));
    next += nb;
  }
  HostAttnStep s;
  s.h = test::host_step(specs, c.block_size);
  s.num_blocks = num_blocks;
  s.max_blocks = int(s.h.block_table.size() / c.rows.size());
  for (size_t b = 0; b < c.rows.size(); b++) {
    const auto [ctx, n] = c.rows[b];
    s.max_context = std::max(s.max_context, ctx);
    const int first_pos = ctx - n;
    const int first_key = c.params.window > 0 ? std::max(0, first_pos - c.params.window + 1) : 0;
    for (int i = 0; i < s.max_blocks; i++) {
      const bool padding = i >= int(specs[b].blocks.size());
      const bool freed = n > 0 && (i + 1) * c.block_size <= first_key;
      if (padding || freed) s.h.block_table[b * size_t(s.max_blocks) + size_t(i)] = -1;
    }
  }
  return s;
}

// The step on a backend; extra_blocks / context_slack widen max_blocks / max_context_len
// the way a CUDA-graph replay passes its capacity.
inline StepTensors upload_step(Backend& be, const HostAttnStep& s, const AttnCase& c,
                               int extra_blocks = 0, int context_slack = 0) {
  const int B = int(c.rows.size()), mb = s.max_blocks + extra_blocks;
  std::vector<int32_t> table(size_t(B) * size_t(mb), -1);
  for (int b = 0; b < B; b++)
    std::copy_n(s.h.block_table.begin() + long(b) * s.max_blocks, s.max_blocks,
                table.begin() + long(b) * mb);
  StepTensors st;
  st.num_tokens = int(s.h.positions.size());
  st.num_rows = B;
  st.max_context_len = s.max_context + context_slack;
  st.block_size = c.block_size;
  for (int b = 0; b < B; b++)
    st.max_row_tokens =
        std::max(st.max_row_tokens, s.h.seq_starts[size_t(b) + 1] - s.h.seq_starts[size_t(b)]);
  const int64_t T = st.num_tokens;
  st.positions = test::put_i32(be, s.h.positions, {T});
  st.seq_starts = test::put_i32(be, s.h.seq_starts, {B + 1});
  st.context_lens = test::put_i32(be, s.h.context_lens, {B});
  st.groups = {{test::put_i32(be, s.h.slot_map, {T}), test::put_i32(be, table, {B, mb}), mb}};
  return st;
}

// Random cache and new K/V/Q, identical (bf16-rounded) on both backends.
struct AttnData {
  std::vector<float> k_cache, v_cache, k_new, v_new, q;
};

inline AttnData random_data(const AttnCase& c, const HostAttnStep& s, std::mt19937& rng) {
  const size_t cache = size_t(s.num_blocks) * c.block_size * c.Hkv * c.Dh;
  const size_t T = s.h.positions.size();
  AttnData d;
  d.k_cache = test::random_bf16(rng, cache);
  d.v_cache = test::random_bf16(rng, cache);
  d.k_new = test::random_bf16(rng, T * c.Hkv * c.Dh);
  d.v_new = test::random_bf16(rng, T * c.Hkv * c.Dh);
  d.q = test::random_bf16(rng, T * c.Hq * c.Dh);
  return d;
}

// Largest relative error of one token's [Hq, Dh] output block.
inline double worst_token_err(const std::vector<float>& got, const std::vector<float>& want,
                              size_t per) {
  double worst = 0;
  for (size_t t = 0; t * per < want.size(); t++) {
    const std::vector<float> a(got.begin() + long(t * per), got.begin() + long((t + 1) * per));
    const std::vector<float> b(want.begin() + long(t * per), want.begin() + long((t + 1) * per));
    const double e = test::rel_err(a, b);
    worst = std::isnan(e) ? e : std::max(worst, e);
    if (std::isnan(e)) break;
  }
  return worst;
}

inline void expect_output(const std::vector<float>& got, const std::vector<float>& want,
                          const AttnCase& c) {
  EXPECT_LE(test::rel_err(got, want), test::kBf16Tol) << "attention output";
  EXPECT_LE(worst_token_err(got, want, size_t(c.Hq) * c.Dh), 2 * test::kBf16Tol)
      << "worst token of the attention output";
}

inline AttentionParams params(float scale, float softcap = 0.f, int window = 0) {
  return AttentionParams{scale, softcap, window};
}

inline float inv_sqrt(int d) {
  return 1.f / std::sqrt(float(d));
}

inline const std::vector<AttnCase>& cases() {
  static const std::vector<AttnCase> all = {
      {"mixed, G1, d64",
       4,
       4,
       64,
       params(inv_sqrt(64)),
       {{1, 1}, {17, 17}, {100, 3}, {2000, 1}, {300, 130}}},
      {"decode, G8, d128, softcap",
       16,
       2,
       128,
       params(1.f, 5.f),
       {{1, 1}, {16, 1}, {777, 1}, {2000, 1}, {33, 1}, {1024, 1}}},
      {"mixed, G2, d256, window, softcap",
       4,
       2,
       256,
       params(inv_sqrt(256), 2.f, 100),
       {{300, 150}, {2000, 1}, {65, 64}, {5, 1}}},
      {"mixed, G4, d512", 4, 1, 512, params(inv_sqrt(512)), {{130, 130}, {1500, 1}, {70, 2}}},
      {"mixed, G4, d96, window",
       8,
       2,
       96,
       params(inv_sqrt(96), 0.f, 64),
       {{500, 1}, {200, 70}, {1999, 1}, {64, 64}}},
      {"mixed, G2, d16, short rows",
       4,
       2,
       16,
       params(0.5f),
       {{1, 1}, {2, 2}, {3, 1}, {16, 16}, {40, 7}, {1, 1}}},
      {"decode, G4, d32, window 8",
       8,
       2,
       32,
       params(inv_sqrt(32), 0.f, 8),
       {{1, 1}, {9, 1}, {100, 1}, {2000, 1}}},
      {"mixed, G32, d64", 32, 1, 64, params(inv_sqrt(64)), {{50, 1}, {40, 20}, {1200, 1}}},
      {"decode, G8, d128, few long rows",
       32,
       4,
       128,
       params(inv_sqrt(128)),
       {{2000, 1}, {1999, 1}, {1500, 1}}},
      {"T == B with a 2-token row and an empty row",
       4,
       2,
       64,
       params(inv_sqrt(64)),
       {{10, 2}, {5, 0}, {7, 1}}},
      {"mixed, block size 12",
       4,
       2,
       128,
       params(inv_sqrt(128), 0.f, 0),
       {{100, 1}, {50, 30}, {13, 13}},
       12},
      {"prefill, G2, d128, many query tiles",
       2,
       1,
       128,
       params(inv_sqrt(128)),
       {{700, 500}, {64, 64}}},
  };
  return all;
}

// Rows decoding one token each at contexts 1 + (37·b mod 300): lengths on and off every
// tile and block boundary.
inline std::vector<std::pair<int, int>> short_decode_rows(int count) {
  std::vector<std::pair<int, int>> rows;
  for (int b = 0; b < count; b++) rows.emplace_back(1 + (37 * b) % 300, 1);
  return rows;
}

// Shapes aimed at the decode kernel: its key-splitting warps and their merge (every
// compiled head dim, padded ones included), the device-side split ranges (one split
// with many rows, many splits with few, mixed lengths), GQA groups 1..32, windows with
// freed (-1) blocks, softcap, a block size that is not a power of two, and a mixed step
// (decode rows next to a prefill row: by_row mode).
inline const std::vector<AttnCase>& decode_cases() {
  static const std::vector<AttnCase> all = {
      {"decode, Llama shape, lengths off the tile grid",
       32,
       8,
       128,
       params(inv_sqrt(128)),
       {{1, 1},
        {15, 1},
        {17, 1},
        {63, 1},
        {65, 1},
        {127, 1},
        {129, 1},
        {255, 1},
        {257, 1},
        {300, 1}}},
      {"decode, Llama shape, lengths 1 and 5000",
       32,
       8,
       128,
       params(inv_sqrt(128)),
       {{1, 1}, {5000, 1}}},
      {"decode, Llama shape, 64 rows (one split)", 32, 8, 128, params(inv_sqrt(128)),
       short_decode_rows(64)},
      {"decode, G2, d256, softcap, window 1000",
       8,
       4,
       256,
       params(inv_sqrt(256), 50.f, 1000),
       {{3000, 1}, {1, 1}, {999, 1}, {1001, 1}, {1064, 1}}},
      {"decode, G8, d256", 16, 2, 256, params(inv_sqrt(256)), {{700, 1}, {129, 1}, {64, 1}}},
      {"decode, G16, d512", 16, 1, 512, params(inv_sqrt(512)), {{600, 1}, {33, 1}, {16, 1}}},
      {"decode, G1, d64", 4, 4, 64, params(inv_sqrt(64)), {{1000, 1}, {127, 1}, {1, 1}}},
      {"decode, G16, d128", 32, 2, 128, params(inv_sqrt(128)), {{400, 1}, {17, 1}, {2, 1}}},
      {"decode, G32, d64", 32, 1, 64, params(inv_sqrt(64)), {{800, 1}, {5, 1}}},
      {"decode, G4, d96, window 200",
       8,
       2,
       96,
       params(inv_sqrt(96), 0.f, 200),
       {{1500, 1}, {201, 1}, {199, 1}, {3, 1}}},
      {"decode, G2, d80 (padded to 96)", 4, 2, 80, params(inv_sqrt(80)), {{300, 1}, {70, 1}}},
      {"decode, G4, d32, window 70",
       8,
       2,
       32,
       params(inv_sqrt(32), 0.f, 70),
       {{2000, 1}, {71, 1}, {1, 1}}},
      {"decode, G4, d128, block size 12",
       8,
       2,
       128,
       params(inv_sqrt(128)),
       {{500, 1}, {13, 1}, {1, 1}, {144, 1}},
       12},
      {"mixed, Llama shape, long decode rows next to a prefill row",
       32,
       8,
       128,
       params(inv_sqrt(128)),
       {{5000, 1}, {300, 40}, {1, 1}, {257, 1}}},
  };
  return all;
}

}  // namespace tandem::test::attention
