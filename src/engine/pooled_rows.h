// The engine's side of embedding requests (engine/pooling.h): which requests it takes, and
// the pooled runs of a forward handed to their sequences. Engine::submit, plan_step, issue
// and finish call these (the only pooling code in engine.cpp is those calls).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"

namespace tandem {

// Why the engine refuses embedding request `r` (nullopt: it takes it, or `r` does not pool).
std::optional<std::string> pooling_refusal(const GenerationRequest& r);

// Prompt positions the row of `seq` should pool if this step computes them (PlanRow's
// pool_begin, pool_end): its owed ones, or none.
PositionRange positions_to_pool(const Sequence& seq);

// The runs the forward just issued pooled (Executor::take_pooled), one per row that pooled,
// in row order, added to their sequences. Before Scheduler::advance: a row's computed
// positions are counted from its sequence's num_computed.
void receive_pooled_runs(const std::vector<ScheduledRow>& rows,
                         const std::vector<std::vector<float>>& runs);

}  // namespace tandem
