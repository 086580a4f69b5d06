#include "backend/cpu/cpu_common.h"

namespace tandem::cpu {

namespace {

std::string_view device_name(Device d) {
  return d == Device::CPU ? "the cpu" : "cuda";
}

// Below this much work per call, waking the pool costs more than it saves.
constexpr int64_t kMinParallelWork = int64_t(1) << 16;

}  // namespace

void check_tensor(const Tensor& t, DType dtype, std::string_view op, std::string_view name) {
  if (!t.defined()) fail("{}: tensor '{}' is undefined", op, name);
  if (t.device != Device::CPU || t.dtype != dtype)
    fail("{}: tensor '{}' must be {} on the cpu, got {} on {} (shape {})", op, name,
         dtype_name(dtype), dtype_name(t.dtype), device_name(t.device), t.shape.str());
}

DType check_weight(const Tensor& t, std::string_view op, std::string_view name) {
  if (!t.defined()) fail("{}: tensor '{}' is undefined", op, name);
  const bool held = t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16;
  if (t.device != Device::CPU || !held)
    fail("{}: weight '{}' must be f32, bf16 or f16 on the cpu, got {} on {} (shape {})", op, name,
         dtype_name(t.dtype), device_name(t.device), t.shape.str());
  return t.dtype;
}

DType check_matrix_weight(const Tensor& t, std::string_view op, std::string_view name) {
  if (t.defined() && t.device == Device::CPU && dtype_is_block(t.dtype)) return t.dtype;
  return check_weight(t, op, name);
}

F32Weights::F32Weights(const Tensor& w, std::string_view op, std::string_view name) {
  if (check_weight(w, op, name) == DType::F32) {
    data_ = w.ptr<float>();
    return;
  }
  copy_.resize(size_t(w.numel()));
  convert_to_f32(w.data, w.dtype, copy_.data(), copy_.size());
  data_ = copy_.data();
}

void check_ndim(const Tensor& t, int ndim, std::string_view op, std::string_view name) {
  if (t.ndim() != ndim)
    fail("{}: tensor '{}' must have {} dims, got shape {}", op, name, ndim, t.shape.str());
}

void check_step(const StepTensors& step, std::string_view op) {
  const int T = step.num_tokens, B = step.num_rows;
  check_tensor(step.positions, DType::I32, op, "step.positions");
  check_tensor(step.seq_starts, DType::I32, op, "step.seq_starts");
  check_tensor(step.context_lens, DType::I32, op, "step.context_lens");
  if (step.positions.numel() < T)
    fail("{}: step has {} tokens but positions {}", op, T, step.positions.shape.str());
  if (step.seq_starts.numel() < B + 1 || step.context_lens.numel() < B)
    fail("{}: step has {} rows but seq_starts {} context_lens {}", op, B,
         step.seq_starts.shape.str(), step.context_lens.shape.str());
  if (step.block_size <= 0) fail("{}: step.block_size {} must be positive", op, step.block_size);
  const int32_t* starts = step.seq_starts.ptr<int32_t>();
  if (starts[0] != 0 || starts[B] != T)
    fail("{}: seq_starts must run from 0 to num_tokens {}, got {}..{}", op, T, starts[0],
         starts[B]);
  for (int b = 0; b < B; b++)
    if (starts[b + 1] < starts[b])
      fail("{}: seq_starts decreases at row {}: {} > {}", op, b, starts[b], starts[b + 1]);
}

void check_kv_addresses(const StepTensors& step, const KvGroupTensors& kv, std::string_view op) {
  check_tensor(kv.slot_map, DType::I32, op, "slot_map");
  check_tensor(kv.block_table, DType::I32, op, "block_table");
  if (kv.slot_map.numel() < step.num_tokens ||
      kv.block_table.numel() < int64_t(step.num_rows) * kv.max_blocks)
    fail("{}: step has {} tokens, {} rows x {} blocks but slot_map {} block_table {}", op,
         step.num_tokens, step.num_rows, kv.max_blocks, kv.slot_map.shape.str(),
         kv.block_table.shape.str());
}

void parallel_for(ThreadPool& pool, int64_t n, int64_t cost_per_item,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || n * cost_per_item < kMinParallelWork || pool.num_threads() == 1) {
    fn(0, n);
    return;
  }
  pool.parallel_for(n, fn);
}

}  // namespace tandem::cpu
