// Builds a StepTensors on a backend from per-row (positions, block ids), the way the
// scheduler's StepPlan would: slot = block_ids[pos / block_size] * block_size +
// pos % block_size, context = last position + 1, rows concatenated in order.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend_test_util.h"

namespace tandem::test {

struct RowSpec {
  std::vector<int32_t> positions;  // positions of the row's new tokens in this step
  std::vector<int32_t> blocks;     // the row's block table
};

// positions [start, start + count) of a row with block table `blocks`.
inline RowSpec row_range(int32_t start, int32_t count, std::vector<int32_t> blocks) {
  RowSpec r;
  r.positions.resize(static_cast<size_t>(count));
  std::iota(r.positions.begin(), r.positions.end(), start);
  r.blocks = std::move(blocks);
  return r;
}

// Host copies of the arrays of a built step, for references.
struct HostStep {
  std::vector<int32_t> positions, slot_map, seq_starts, context_lens, block_table, sample_index;
};

inline HostStep host_step(const std::vector<RowSpec>& rows, int block_size) {
  HostStep h;
  size_t max_blocks = 1;
  for (const auto& r : rows) max_blocks = std::max(max_blocks, r.blocks.size());
  h.seq_starts.push_back(0);
  for (const auto& r : rows) {
    int32_t last = -1;
    for (int32_t p : r.positions) {
      h.positions.push_back(p);
      h.slot_map.push_back(r.blocks.at(size_t(p / block_size)) * block_size + p % block_size);
      last = std::max(last, p);
    }
    h.seq_starts.push_back(int32_t(h.positions.size()));
    h.context_lens.push_back(last + 1);
    if (!r.positions.empty()) h.sample_index.push_back(int32_t(h.positions.size()) - 1);
    std::vector<int32_t> table = r.blocks;
    table.resize(max_blocks, 0);  // padding is never read: it lies past the context
    h.block_table.insert(h.block_table.end(), table.begin(), table.end());
  }
  return h;
}

inline StepTensors build_step(Backend& be, const std::vector<RowSpec>& rows, int block_size = 16) {
  const HostStep h = host_step(rows, block_size);
  StepTensors s;
  s.num_tokens = int(h.positions.size());
  s.num_rows = int(rows.size());
  const int max_blocks = int(h.block_table.size() / rows.size());
  s.block_size = block_size;
  s.max_context_len = *std::max_element(h.context_lens.begin(), h.context_lens.end());
  const int64_t T = s.num_tokens, B = s.num_rows;
  s.tokens = be.zeros(DType::I32, {T});
  s.positions = device_i32(be, h.positions, {T});
  s.seq_starts = device_i32(be, h.seq_starts, {B + 1});
  s.context_lens = device_i32(be, h.context_lens, {B});
  s.groups = {{device_i32(be, h.slot_map, {T}), device_i32(be, h.block_table, {B, max_blocks}),
               max_blocks}};
  s.sample_index = device_i32(be, h.sample_index, {int64_t(h.sample_index.size())});
  return s;
}

// The ids 0..n-1 in a random order: block tables drawn from it are non-contiguous.
inline std::vector<int32_t> shuffled_ids(std::mt19937& rng, int n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

}  // namespace tandem::test
