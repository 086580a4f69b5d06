#include "backend/step_tensors.h"

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
  if (s.lora) t.lora_slots = make(Shape{s.num_tokens});
  t.num_tokens = s.num_tokens;
  t.num_rows = s.num_rows;
  t.max_context_len = s.max_context_len;
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

}  // namespace tandem
