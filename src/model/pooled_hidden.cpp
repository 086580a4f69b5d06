#include "model/pooled_hidden.h"

#include "core/error.h"

namespace tandem {

void pool_hidden(Backend& be, const Tensor& rows, const PoolTensors& pool,
                 const RmsNorm& final_norm) {
  TANDEM_CHECK(rows.rows() == pool.index.numel() && pool.sums.cols() == rows.cols(),
               "pool_hidden: {} rows of {} for {} pooled tokens into sums {}", rows.rows(),
               rows.cols(), pool.index.numel(), pool.sums.shape.str());
  Tensor normed = final_norm.defined() ? rms_norm(be, rows, final_norm) : rows;
  Tensor sums = pool.sums;  // a handle on the step's output
  be.segment_sum(sums, normed, pool.starts);
}

Tensor step_outputs(Backend& be, const Tensor& x, const StepTensors& step, const LmHead& head) {
  if (step.pool.defined())
    pool_hidden(be, gather_rows(be, x, step.pool.index), step.pool, head.final_norm);
  return lm_head_logits(be, gather_rows(be, x, step.sample_index), head, step.logits_out);
}

}  // namespace tandem
