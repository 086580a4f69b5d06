// The device side of a step's embedding rows (engine/pooling.h): the plan's pooled tokens
// uploaded for the model (StepTensors::pool), and the runs' sums brought back to the host —
// one [hidden] f32 vector per run, the only thing of an embedding row that leaves the device.
// Also the step's other rows that leave it before sampling: the prompt-logprob rows, scored.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "engine/request.h"
#include "engine/step_plan.h"

namespace tandem {

// The plan's pool_index and pool_starts on the device, and room for the sums [E, hidden]
// f32; undefined when the plan pools nothing.
PoolTensors upload_pool_tensors(Backend& backend, const StepPlan& plan, int hidden);

// sums [E, hidden] f32 on the device → one host vector per run, in plan order (waits for
// the device).
std::vector<std::vector<float>> pooled_runs_to_host(Backend& backend, const Tensor& sums);

// log_softmax of each prompt-logprob row (rows [logprob_index.size(), vocab], in the plan's
// order; waits for the device) at its target, with the plan's top-k of each.
std::vector<GeneratedToken> score_prompt_rows(Backend& backend, const Tensor& rows,
                                              const StepPlan& plan);

}  // namespace tandem
