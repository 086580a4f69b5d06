// KV budget: how many blocks each KV group gets (docs/DESIGN.md §3). A sliding-window group
// never needs more blocks than its rows' windows plus one step's new tokens cover (blocks
// that leave the window are released before every step), so it gets exactly that; the
// full-attention group takes the rest of the byte budget.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_groups.h"

namespace tandem {

struct KvSizing {
  int block_size = 16;
  int max_rows = 1;               // sequences per step (--batch)
  int max_batched_tokens = 2048;  // new tokens per step, all rows together
  int max_model_len = 1;          // tokens of one sequence, at most
  std::optional<int64_t> budget_bytes;  // all groups together; nullopt: every row at max_model_len
  // With the prefix cache a window group holds one block more behind each row's window
  // (kv/kv_block_manager.h), so it is sized for window + block_size.
  bool prefix_caching = false;
};

// Blocks (the null block included) that let `rows` running sequences hold all they can
// see of a `window` (>0) at once, whatever their lengths and however a step's token budget
// is split among them. Derivation: a row at num_computed c computing n tokens holds
// blocks [⌊(c − w + 1)/bs⌋, ⌈(c + n)/bs⌉), at most ⌈(w + bs − 2)/bs⌉ + ⌈n/bs⌉ of them,
// and Σ⌈n_r/bs⌉ ≤ ⌈N/bs⌉ + rows − 1 for Σ n_r ≤ N; never more than rows full sequences.
// `window` is the held window (the model's, plus block_size with the prefix cache).
int window_group_blocks(int window, int rows, const KvSizing& s);

// The window a group of the model's `window` holds under sizing `s`.
inline int held_window(int window, const KvSizing& s) {
  return window + (s.prefix_caching ? s.block_size : 0);
}

// Blocks of each group (null blocks included). `bytes_per_block[g]` is what one block id
// of group g takes over the group's layers. Window groups get window_group_blocks for
// max_rows rows (fewer rows when the budget cannot pay for that), the full group the
// rest: at least 2 blocks, and max_rows full-length sequences without a budget.
std::vector<int> plan_group_blocks(const KvGroups& groups, std::span<const int64_t> bytes_per_block,
                                   const KvSizing& s);

// Bytes that many blocks take.   num_blocks, bytes_per_block [G]
int64_t kv_bytes(std::span<const int> num_blocks, std::span<const int64_t> bytes_per_block);

}  // namespace tandem
