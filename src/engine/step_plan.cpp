#include "engine/step_plan.h"

#include <algorithm>

#include "core/error.h"
#include "kv/block_pool.h"

namespace tandem {

namespace {

// Group g's slots and table for all rows.
KvGroupPlan group_plan(std::span<const PlanRow> rows, int g, int block_size) {
  KvGroupPlan plan;
  for (auto& r : rows)
    plan.max_blocks = std::max(plan.max_blocks, int(r.block_tables[size_t(g)].size()));
  plan.block_table.assign(rows.size() * size_t(plan.max_blocks), BlockPool::kNullBlock);
  for (size_t b = 0; b < rows.size(); b++) {
    const PlanRow& r = rows[b];
    std::span<const int32_t> table = r.block_tables[size_t(g)];
    int end = r.start + r.count;
    TANDEM_CHECK(blocks_for(end, block_size) <= int(table.size()),
                 "row {}: {} tokens need more than the {} blocks of KV group {}", b, end,
                 table.size(), g);
    for (int p = r.start; p < end; p++) {
      int32_t block = table[size_t(p / block_size)];
      TANDEM_CHECK(block != BlockPool::kNullBlock,
                   "row {}: position {} would be written to the null block of KV group {}", b, p,
                   g);
      plan.slot_map.push_back(block * block_size + p % block_size);
    }
    std::copy(table.begin(), table.end(), plan.block_table.begin() + long(b) * plan.max_blocks);
  }
  return plan;
}

// Row r's images in the step: each overlapping [start, end) must lie whole inside it.
void add_media(StepPlan& plan, const PlanRow& r, size_t b, int row_first) {
  const int end = r.start + r.count;
  for (const MediaSpan& m : r.media) {
    if (m.start + m.length <= r.start || m.start >= end) continue;
    TANDEM_CHECK(m.start >= r.start && m.start + m.length <= end && m.length > 0 && m.image,
                 "row {}: the image at positions [{}, {}) is split by the step's tokens [{}, {})",
                 b, m.start, m.start + m.length, r.start, end);
    plan.media.push_back({row_first + (m.start - r.start), m.image});
  }
}

// [T] image ends, once a row has an image: every token's 0 unless it lies in an image.
void fill_media_ends(StepPlan& plan, std::span<const PlanRow> rows) {
  if (plan.media.empty()) return;
  plan.media_ends.assign(plan.tokens.size(), 0);
  for (size_t b = 0; b < rows.size(); b++)
    for (const MediaSpan& m : rows[b].media)
      for (int p = std::max(m.start, rows[b].start);
           p < std::min(m.start + m.length, rows[b].start + rows[b].count); p++) {
        plan.media_ends[size_t(plan.seq_starts[b] + (p - rows[b].start))] = m.start + m.length;
      }
}

}  // namespace

StepPlan build_step_plan(std::span<const PlanRow> rows, int block_size) {
  StepPlan plan;
  plan.block_size = block_size;
  const size_t G = rows.empty() ? 0 : rows[0].block_tables.size();
  plan.seq_starts.push_back(0);
  for (size_t b = 0; b < rows.size(); b++) {
    const PlanRow& r = rows[b];
    const int end = r.start + r.count, known = int(r.tokens.size());
    TANDEM_CHECK(r.count > 0 && end <= known + int(r.draft.size()) + (r.feed_from ? 1 : 0),
                 "row {}: {}+{} of {} tokens{}", b, r.start, r.count, known + int(r.draft.size()),
                 r.feed_from ? " and one in flight" : "");
    TANDEM_CHECK(r.draft.empty() || !r.feed_from, "row {}: proposals after a token in flight", b);
    TANDEM_CHECK(G > 0 && r.block_tables.size() == G, "row {}: {} block tables, row 0 has {}", b,
                 r.block_tables.size(), G);
    for (int p = r.start; p < end; p++) {
      if (p == known && r.feed_from) {  // in flight: the device has it
        plan.feed_index.push_back(int32_t(plan.tokens.size()));
        plan.feed_source.push_back(*r.feed_from);
      }
      plan.tokens.push_back(p < known ? r.tokens[size_t(p)]
                            : r.feed_from ? 0 : r.draft[size_t(p - known)]);
      plan.positions.push_back(p);
    }
    const int row_first = int(plan.tokens.size()) - r.count;
    add_media(plan, r, b, row_first);
    for (int p = std::max(r.start, r.logprob_begin); p < std::min(end, r.logprob_end); p++) {
      TANDEM_CHECK(p + 1 < known, "row {}: position {} scores a token that is not known", b, p);
      plan.logprob_index.push_back(row_first + (p - r.start));
      plan.logprob_target.push_back(r.tokens[size_t(p + 1)]);
      plan.logprob_top.push_back(r.logprob_top);
    }
    const int pool_first = std::max(r.start, r.pool_begin), pool_end = std::min(end, r.pool_end);
    if (pool_first < pool_end) {
      TANDEM_CHECK(pool_end <= known, "row {}: position {} is pooled but not known", b,
                   pool_end - 1);
      if (plan.pool_starts.empty()) plan.pool_starts.push_back(0);
      for (int p = pool_first; p < pool_end; p++)
        plan.pool_index.push_back(row_first + (p - r.start));
      plan.pool_starts.push_back(int32_t(plan.pool_index.size()));
    }
    int first_logit = int(plan.tokens.size()) - std::min(r.num_logits, r.count);
    for (int t = first_logit; t < int(plan.tokens.size()); t++) plan.sample_index.push_back(t);
    plan.seq_starts.push_back(int(plan.tokens.size()));
    plan.context_lens.push_back(end);
  }
  fill_media_ends(plan, rows);
  for (size_t g = 0; g < G; g++) plan.groups.push_back(group_plan(rows, int(g), block_size));
  if (std::any_of(rows.begin(), rows.end(), [](const PlanRow& r) { return r.lora_slot > 0; }))
    for (const PlanRow& r : rows) plan.lora_slots.insert(plan.lora_slots.end(), size_t(r.count), r.lora_slot);
  return plan;
}

}  // namespace tandem
