// What leaves a step besides logits: the pooled hidden states of its embedding rows
// (engine/pooling.h). A model ends its forward with step_outputs() (or, when its final
// hidden state is not one tensor of every token, with pool_hidden() over the rows it
// computes for step.pool.index), so an embedding is what the LM head would have
// multiplied: the last residual stream through the final norm, with no logit divisor and
// no softcap (those belong to the logits).
#pragma once

#include "backend/backend.h"
#include "model/layers.h"

namespace tandem {

// rows [Q, D]: the final residual stream at step.pool.index → the final norm → summed run by
// run into pool.sums [E, D] f32 (Backend::segment_sum).
void pool_hidden(Backend& be, const Tensor& rows, const PoolTensors& pool,
                 const RmsNorm& final_norm);

// x [T, D], the final residual stream → logits [S, V] f32 of step.sample_index; pools the
// step's embedding rows first, when it has any.
Tensor step_outputs(Backend& be, const Tensor& x, const StepTensors& step, const LmHead& head);

}  // namespace tandem
