// Helpers shared by the CPU op files: argument validation (every op checks what it is
// given and says which op, which tensor and what it got), the pool dispatch rule, weight
// vectors read as f32, and the row kernels that more than one op family uses (gated
// activation; the GEMM is cpu_gemm.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

// Fails unless `t` is defined, on the CPU and of `dtype`:
//   "rms_norm: tensor 'w' must be f32 on the cpu, got bf16 on the cpu"
void check_tensor(const Tensor& t, DType dtype, std::string_view op, std::string_view name);

// Fails unless `t` is a defined CPU tensor of a dtype weights are held in (f32, bf16,
// f16); returns that dtype.
DType check_weight(const Tensor& t, std::string_view op, std::string_view name);

// check_weight, or a ggml block type (core/ggml_blocks.h): what the matrix-taking ops
// (linear, embedding, moe_experts) accept.
DType check_matrix_weight(const Tensor& t, std::string_view op, std::string_view name);

// A weight vector (a norm's scale, a broadcast row) read as f32: the tensor's own data
// when it is f32, else a widened copy. Small vectors only: it copies.
class F32Weights {
 public:
  F32Weights(const Tensor& w, std::string_view op, std::string_view name);
  const float* data() const { return data_; }

 private:
  std::vector<float> copy_;
  const float* data_ = nullptr;
};

// Fails unless `t` has exactly `ndim` dimensions.
void check_ndim(const Tensor& t, int ndim, std::string_view op, std::string_view name);

// Fails unless the step's i32 arrays are CPU tensors of the sizes its counts claim and
// seq_starts is a monotone cover of [0, num_tokens).
void check_step(const StepTensors& step, std::string_view op);
// Fails unless one KV group's slot map and block table are CPU i32 tensors that cover the
// step's tokens and rows.
void check_kv_addresses(const StepTensors& step, const KvGroupTensors& kv, std::string_view op);

// Runs fn(begin, end) over disjoint chunks covering [0, n). Uses the pool only when
// n * cost_per_item (roughly flops) is large enough to pay for waking it; the chunking
// never changes what one item computes, so results do not depend on the thread count.
void parallel_for(ThreadPool& pool, int64_t n, int64_t cost_per_item,
                  const std::function<void(int64_t, int64_t)>& fn);

// out[r] = act(gate[r]) * up[r] for rows [0, rows), gate_up row = [gate (f) | up (f)].
//   out [rows, f], gate_up [rows, 2f]
void gated_act_rows(float* out, const float* gate_up, int64_t rows, int64_t f, Activation act);

}  // namespace tandem::cpu
