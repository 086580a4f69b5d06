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
// verify is the ranks' ordinary forward.
//
// Asynchronous, as the single worker (executor.h's Overlap): issue_forward and
// issue_sampling post jobs to the ranks' in-order queues (TpRanks::post) and return; each
// rank's thread runs its forward, then (rank 0) samples and waits for the ids, and every rank
// receives them in the broadcast. A plan's fed tokens are resolved on each rank's thread from
// its own copy of the previous broadcast (the jobs of one rank run in order, so that copy is
// the previous sampling's): plain host ids, the same on CPU and GPU ranks, and no device
// buffer of one rank is read by another; each rank waits for the ids between two steps. One
// rank (TANDEM_TP_EXECUTOR, the seam's measure) has nobody to broadcast to: it feeds from its
// latest sampling op on the device and waits for that op only in collect's job, queued after
// the steps issued since — the single worker's order. collect() waits for the oldest step. What
// reads rank 0's results on the caller's thread waits for the queue first: prompt logprobs
// and pooled runs (their forward's job), the draft model (drain), allocation, graphs, LoRA
// installs (TpRanks::run), reset and destruction (drain). A job's error surfaces in the next
// wait — collect, drain, a step that reads rows back — never on the rank's thread.
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
