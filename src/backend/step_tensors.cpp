#include "backend/step_tensors.h"

#include <algorithm>

#include "backend/backend.h"

namespace tandem {

namespace {

template <typename MakeI32>
StepTensors make_step_tensors(const StepShape& s, MakeI32 make) {
  StepTensors t;
  t.tokens = make(Shape{s.num_tokens});
  t.positions = make(Shape{s.num_tokens});
  t.seq_starts = make(Shape{s.num_rows + 1});
  t.context_lens = make(Shape{s.num_rows});
  t.sample_index = make(Shape{s.num_samples});
  if (s.lora)
    t.lora = {make(Shape{s.num_tokens}), make(Shape{s.num_tokens}), make(Shape{s.num_tokens}),
              make(Shape{1}), make(Shape{1 + kLoraTileInts * s.num_tokens})};
  t.num_tokens = s.num_tokens;
  t.num_rows = s.num_rows;
  t.max_context_len = s.max_context_len;
  t.max_row_tokens = s.max_row_tokens;
  t.block_size = s.block_size;
  for (int width : s.max_blocks)
    t.groups.push_back({make(Shape{s.num_tokens}), make(Shape{s.num_rows, width}), width});
  return t;
}

}  // namespace

StepTensors alloc_step_tensors(Backend& backend, const StepShape& shape) {
  return make_step_tensors(shape, [&](Shape s) { return backend.alloc(DType::I32, s); });
}

StepTensors zeroed_step_tensors(Backend& backend, const StepShape& shape) {
  return make_step_tensors(shape, [&](Shape s) { return backend.zeros(DType::I32, s); });
}

std::vector<int32_t> lora_row_order(std::span<const int32_t> slots) {
  int32_t max_slot = 0;
  for (int32_t s : slots) max_slot = std::max(max_slot, s);
  std::vector<int32_t> start(size_t(max_slot) + 2, 0);  // counting sort, stable
  for (int32_t s : slots)
    if (s > 0) start[size_t(s) + 1]++;
  for (size_t s = 1; s < start.size(); s++) start[s] += start[s - 1];
  std::vector<int32_t> order(size_t(start.back()));
  for (size_t t = 0; t < slots.size(); t++)
    if (slots[t] > 0) order[size_t(start[size_t(slots[t])]++)] = int32_t(t);
  return order;
}

void write_lora_rows(Backend& backend, LoraRows& rows, std::span<const int32_t> slots) {
  std::vector<int32_t> order = lora_row_order(slots);
  const int32_t num_active = int32_t(order.size());
  backend.write_i32(rows.slots, slots.data(), int64_t(slots.size()));
  backend.write_i32(rows.order, order.data(), int64_t(order.size()));
  std::vector<int32_t> order_slots(order.size());
  for (size_t i = 0; i < order.size(); i++) order_slots[i] = slots[size_t(order[i])];
  backend.write_i32(rows.order_slots, order_slots.data(), int64_t(order_slots.size()));
  backend.write_i32(rows.num_active, &num_active, 1);
  if (rows.tiles.defined()) {
    const std::vector<int32_t> tiles = lora_tiles(order, order_slots);
    backend.write_i32(rows.tiles, tiles.data(), int64_t(tiles.size()));
  }
}

std::vector<int32_t> lora_tiles(std::span<const int32_t> order,
                                std::span<const int32_t> order_slots) {
  std::vector<int32_t> tiles{0};
  const int32_t n = int32_t(order_slots.size());
  for (int32_t begin = 0; begin < n;) {
    int32_t end = begin + 1;  // the run of begin's slot
    while (end < n && order_slots[size_t(end)] == order_slots[size_t(begin)]) end++;
    for (int32_t t = begin; t < end; t += kLoraTile) {
      const int32_t rows = std::min(kLoraTile, end - t);
      tiles.push_back(t * kLoraTile + rows - 1);
      tiles.push_back(order_slots[size_t(t)]);
      for (int32_t i = 0; i < kLoraTile; i++)
        tiles.push_back(order[size_t(t + std::min(i, rows - 1))]);
    }
    begin = end;
  }
  tiles[0] = int32_t((tiles.size() - 1) / kLoraTileInts);
  return tiles;
}

}  // namespace tandem
