#include "engine/model_runner.h"

#include "core/error.h"

namespace tandem {

int64_t ModelRunner::bytes_per_block(const Model& model, int block_size, DType dtype) {
  int64_t bytes = 0;
  for (auto& s : model.kv_specs())
    if (s.shares_with < 0)
      bytes += 2 * int64_t(block_size) * s.num_kv_heads * s.head_dim * int64_t(dtype_size(dtype));
  return bytes;
}

ModelRunner::ModelRunner(Model& model, Backend& backend, int num_blocks, int block_size)
    : model_(model), backend_(backend), num_blocks_(num_blocks), block_size_(block_size) {
  for (auto& s : model.kv_specs()) {
    PagedKv kv;
    if (s.shares_with < 0) {
      Shape shape{num_blocks, block_size, s.num_kv_heads, s.head_dim};
      kv.k = backend.zeros(backend.act_dtype(), shape);
      kv.v = backend.zeros(backend.act_dtype(), shape);
    }
    kv_.push_back(kv);
  }
}

StepTensors ModelRunner::upload(const StepPlan& plan) {
  auto i32 = [&](const std::vector<int32_t>& v, Shape shape) {
    Tensor host = Tensor::borrow(const_cast<int32_t*>(v.data()), DType::I32, shape);
    return backend_.upload(host, DType::I32);
  };
  int64_t T = plan.num_tokens(), B = plan.num_rows();
  StepTensors s;
  s.tokens = i32(plan.tokens, {T});
  s.positions = i32(plan.positions, {T});
  s.slot_map = i32(plan.slot_map, {T});
  s.seq_starts = i32(plan.seq_starts, {B + 1});
  s.context_lens = i32(plan.context_lens, {B});
  s.block_table = i32(plan.block_table, {B, int64_t(plan.max_blocks)});
  s.sample_index = i32(plan.sample_index, {int64_t(plan.sample_index.size())});
  s.num_tokens = int(T);
  s.num_rows = int(B);
  s.max_blocks = plan.max_blocks;
  s.block_size = block_size_;
  for (int32_t len : plan.context_lens) s.max_context_len = std::max(s.max_context_len, len);
  return s;
}

Tensor ModelRunner::forward(const StepPlan& plan) {
  TANDEM_CHECK(plan.block_size == block_size_, "plan block size {} vs {}", plan.block_size,
               block_size_);
  for (int32_t slot : plan.slot_map)
    TANDEM_CHECK(slot >= 0 && slot < num_blocks_ * block_size_, "slot {} out of range", slot);
  StepTensors step = upload(plan);
  Tensor logits = model_.forward(step, kv_);
  return backend_.to_host_f32(logits);
}

}  // namespace tandem
