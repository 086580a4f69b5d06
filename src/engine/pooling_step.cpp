#include "engine/pooling_step.h"

#include "core/error.h"
#include "engine/sampler.h"

namespace tandem {

PoolTensors upload_pool_tensors(Backend& backend, const StepPlan& plan, int hidden) {
  if (plan.pool_index.empty()) return {};
  const int64_t Q = int64_t(plan.pool_index.size()), E = int64_t(plan.pool_starts.size()) - 1;
  TANDEM_CHECK(E >= 1 && plan.pool_starts.front() == 0 && plan.pool_starts.back() == Q,
               "the plan pools {} tokens in runs starting at {} entries", Q,
               plan.pool_starts.size());
  for (int32_t t : plan.pool_index)
    TANDEM_CHECK(t >= 0 && t < plan.num_tokens(), "pooled token {} of a step of {}", t,
                 plan.num_tokens());
  PoolTensors pool{.index = backend.alloc(DType::I32, {Q}),
                   .starts = backend.alloc(DType::I32, {E + 1}),
                   .sums = backend.alloc(DType::F32, {E, int64_t(hidden)})};
  backend.write_i32(pool.index, plan.pool_index.data(), Q);
  backend.write_i32(pool.starts, plan.pool_starts.data(), E + 1);
  return pool;
}

std::vector<std::vector<float>> pooled_runs_to_host(Backend& backend, const Tensor& sums) {
  const Tensor host = backend.to_host_f32(sums);
  const int64_t D = host.cols();
  std::vector<std::vector<float>> out(size_t(host.rows()));
  for (size_t e = 0; e < out.size(); e++)
    out[e].assign(host.ptr<float>() + int64_t(e) * D, host.ptr<float>() + int64_t(e + 1) * D);
  return out;
}

std::vector<GeneratedToken> score_prompt_rows(Backend& backend, const Tensor& rows,
                                              const StepPlan& plan) {
  const Tensor host = backend.to_host_f32(rows);
  const size_t vocab = size_t(host.shape[1]);
  std::vector<GeneratedToken> out(plan.logprob_index.size());
  for (size_t p = 0; p < out.size(); p++) {
    std::span<const float> logits(host.ptr<float>() + p * vocab, vocab);
    out[p].token = plan.logprob_target[p];
    out[p].logprob = token_logprob(logits, out[p].token, plan.logprob_top[p], &out[p].top_logprobs);
  }
  return out;
}

}  // namespace tandem
