#include "kv/kv_budget.h"

#include <algorithm>

#include "core/error.h"
#include "kv/block_pool.h"

namespace tandem {

int window_group_blocks(int window, int rows, const KvSizing& s) {
  TANDEM_CHECK(window > 0 && rows > 0 && s.block_size > 0 && s.max_model_len > 0,
               "window_group_blocks: window {} rows {} block_size {} max_model_len {}", window,
               rows, s.block_size, s.max_model_len);
  const int bs = s.block_size;
  int64_t per_row = blocks_for(int64_t(window) + bs - 2, bs) + 1;
  int64_t by_window = int64_t(rows) * per_row + blocks_for(s.max_batched_tokens, bs) - 1;
  int64_t by_length = int64_t(rows) * blocks_for(s.max_model_len, bs);
  return int(std::min(by_window, by_length) + 1);  // + the null block
}

namespace {

// Bytes the window groups take when sized for `rows` rows.
int64_t window_bytes(const KvGroups& groups, std::span<const int64_t> bytes_per_block,
                     const KvSizing& s, int rows) {
  int64_t bytes = 0;
  for (int g = 0; g < groups.num_groups(); g++)
    if (groups.groups[size_t(g)].sliding())
      bytes += window_group_blocks(held_window(groups.groups[size_t(g)].window, s), rows, s) *
               bytes_per_block[size_t(g)];
  return bytes;
}

}  // namespace

std::vector<int> plan_group_blocks(const KvGroups& groups, std::span<const int64_t> bytes_per_block,
                                   const KvSizing& s) {
  const int G = groups.num_groups();
  TANDEM_CHECK(int(bytes_per_block.size()) == G && G > 0,
               "plan_group_blocks: {} sizes for {} groups", bytes_per_block.size(), G);
  for (int64_t b : bytes_per_block)
    TANDEM_CHECK(b > 0, "plan_group_blocks: a group's block takes {} bytes", b);
  const bool has_full = !groups.groups[0].sliding();
  const int64_t full_min = has_full ? 2 * bytes_per_block[0] : 0;
  int rows = std::max(1, s.max_rows);
  // Under a budget, a window group smaller than max_rows rows only makes rows wait
  // (preemption), never fail: one row always fits.
  while (s.budget_bytes && rows > 1 &&
         window_bytes(groups, bytes_per_block, s, rows) + full_min > *s.budget_bytes)
    rows--;
  std::vector<int> blocks(size_t(G), 0);
  for (int g = 0; g < G; g++)
    if (groups.groups[size_t(g)].sliding())
      blocks[size_t(g)] = window_group_blocks(held_window(groups.groups[size_t(g)].window, s), rows, s);
  if (!has_full) return blocks;
  if (!s.budget_bytes) {
    blocks[0] = blocks_for(int64_t(s.max_model_len) * std::max(1, s.max_rows), s.block_size) + 1;
  } else {
    int64_t left = *s.budget_bytes - window_bytes(groups, bytes_per_block, s, rows);
    blocks[0] = int(std::clamp<int64_t>(left / bytes_per_block[0] + 1, 2, INT32_MAX));
  }
  return blocks;
}

int64_t kv_bytes(std::span<const int> num_blocks, std::span<const int64_t> bytes_per_block) {
  int64_t total = 0;
  for (size_t g = 0; g < num_blocks.size(); g++)
    total += int64_t(num_blocks[g]) * bytes_per_block[g];
  return total;
}

}  // namespace tandem
