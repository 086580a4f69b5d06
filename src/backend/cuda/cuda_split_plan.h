// How decode attention splits a token's keys over CTAs (flash-decoding), in host
// integers only so that a captured graph's launch shape never depends on device data.
// Shared by the launcher (cuda_attention.cu), the kernels (split_chunk on the device)
// and the planner's tests.
#pragma once

#include <cuda_runtime.h>  // __host__ __device__

#include <algorithm>
#include <cstdint>

namespace tandem::attn {

constexpr int kMaxSplits = 128;  // flash-decoding splits per (token, kv head)
constexpr int kSplitAlign = 64;  // a split's key count is a multiple of every key tile
// A split covers at least this many keys (if it has them): one 64-key tile at Dh 96..128,
// so a short context spreads over many CTAs of one tile each (the splits merge in the
// decode kernel itself, so more splits cost little).
constexpr int kMinSplitKeys = 64;
// A plan is good once its waves of CTAs are this full (256 rows × 8 kv heads at 3 CTAs
// per SM on 132 SMs: 86% unsplit, 94% in 2 splits).
constexpr double kFullWaves = 0.93;

// Keys per split of a token that sees `keys` keys: an even share rounded up to whole
// tiles, at least kMinSplitKeys. Split s covers keys [s·chunk, (s+1)·chunk) of the token's
// range; ceil(keys / chunk) <= num_splits of them hold keys, the others exit at once.
__host__ __device__ inline int split_chunk(int num_splits, int keys) {
  const int share = (keys + num_splits - 1) / num_splits;
  const int chunk = (share + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
  return chunk > kMinSplitKeys ? chunk : kMinSplitKeys;
}

// The split count S that makes items · S CTAs fill the GPU's num_sms · ctas_per_sm slots
// well: the smallest S whose waves are >= kFullWaves full (items · S / (waves · slots); a
// partial single wave counts as one wave), else the fullest S; at most kMaxSplits and
// ceil(max_keys / kMinSplitKeys). Each CTA derives its keys from its token's real key
// count (split_chunk), so max_keys only has to be an upper bound: a graph's capacity
// merely lifts the cap. More items than arrival counters (max_split_items): 1.
inline int plan_num_splits(int64_t num_items, int max_keys, int num_sms, int ctas_per_sm,
                           int64_t max_split_items) {
  if (num_items > max_split_items) return 1;
  const int64_t slots = std::max(1, num_sms) * int64_t(std::max(1, ctas_per_sm));
  const int64_t items = std::max<int64_t>(1, num_items);
  const int64_t by_len = (std::max<int64_t>(1, max_keys) + kMinSplitKeys - 1) / kMinSplitKeys;
  const int cap = int(std::clamp<int64_t>(by_len, 1, kMaxSplits));
  int best = 1;
  double best_fill = -1.0;
  for (int s = 1; s <= cap; s++) {
    const int64_t ctas = items * s, waves = (ctas + slots - 1) / slots;
    const double fill = double(ctas) / double(waves * slots);
    if (fill >= kFullWaves) return s;
    if (fill > best_fill + 1e-9) {
      best = s;
      best_fill = fill;
    }
  }
  return best;
}

}  // namespace tandem::attn
