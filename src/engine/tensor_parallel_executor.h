// The tensor-parallel Executor (engine/executor.h; docs/tensor-parallel.md): N ranks, CPU
// threads or GPUs (engine/tp_ranks.h), each with its slices of the model, its own
// ModelRunner — its heads of the KV cache, the same number of blocks as every other rank —
// and its own upload of the same StepPlan. Every rank runs every forward; the ranks meet in
// two all-reduces a layer (after attention's o and the MLP's down) and in the gathered
// logits. Rank 0 samples, and the sampled ids are broadcast, so every rank feeds the same
// tokens (written into the next plan on the host). The engine, scheduler and KV manager see
// one executor, as with one worker. On GPUs each rank records its own decode graphs, the
// NCCL all-reduces inside them.
//
// The KV budget (--kv-budget) is per rank: each rank's cache holds its KV heads of every
// block. LoRA adapters are cut like their base weights (each rank installs its slices).
// Speculative decoding's draft model runs whole beside the ranks, on rank 0's backend (its
// K/V in rank 0's blocks, counted in rank 0's budget), fed the broadcast sampled ids; the
// verify is the ranks' ordinary forward. Steps are synchronous (sampling waits for rank 0's
// ids before the next step is issued).
#pragma once

#include <memory>

#include "engine/executor.h"
#include "engine/tp_ranks.h"

namespace tandem {

// `backend0` and `model0` are rank 0's (TpRanks::load), moved in beside the group; `draft`,
// when given, was loaded on `backend0`.
std::unique_ptr<Executor> make_tensor_parallel_executor(std::unique_ptr<Backend> backend0,
                                                        std::unique_ptr<Model> model0,
                                                        std::shared_ptr<TpRanks> ranks,
                                                        ExecutorConfig config = {},
                                                        std::unique_ptr<Model> draft = nullptr);

}  // namespace tandem
