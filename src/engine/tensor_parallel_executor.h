// The tensor-parallel Executor (engine/executor.h; docs/tensor-parallel.md): N ranks, CPU
// threads or GPUs (engine/tp_ranks.h), each with its slices of the model, its own
// ModelRunner — its heads of the KV cache, the same number of blocks as every other rank —
// and its own upload of the same StepPlan. Every rank runs every forward; the ranks meet in
// two all-reduces a layer (after attention's o and the MLP's down) and in the gathered
// logits. Rank 0 samples on its device, and the sampled ids are broadcast device to device
// (Communicator::broadcast_ids), so every rank feeds the same tokens from its own device copy;
// only rank 0's ids reach the host, for the engine. The engine, scheduler and KV manager see
// one executor, as with one worker. On GPUs each rank records its own decode graphs (and a
// speculating engine's verify graphs), the NCCL collectives inside them.
//
// The KV budget (--kv-budget) is per rank: each rank's cache holds its KV heads of every
// block. LoRA adapters are cut like their base weights (each rank installs its slices).
// Speculative decoding's draft model runs whole beside the ranks, on rank 0's backend (its
// K/V in rank 0's blocks, counted in rank 0's budget), fed the broadcast sampled ids; the
// verify is the ranks' ordinary forward.
//
// Asynchronous, as the single worker (executor.h's Overlap): issue_forward and
// issue_sampling post jobs to the ranks' in-order queues (TpRanks::post) and return; each
// rank's thread runs its forward, then rank 0 issues its sampling op and the broadcast of its
// picked ids (Backend::sampled_ids), and every rank enqueues the receiving end. Nobody waits:
// on GPUs these are ops on each rank's stream. A plan's fed tokens are written on each rank's
// device from its own copy of the previous broadcast (Backend::picked_ids; the jobs of one
// rank run in order, so that copy is the previous sampling's), and no device buffer of one
// rank is read by another. Rank 0 waits for its sampling op only in collect's job, queued
// after the steps issued since — the single worker's order. One rank (TANDEM_TP_EXECUTOR,
// the seam's measure) has nobody to broadcast to: it feeds from its sampling op itself
// (TpExecutorOptions forces the broadcast there). collect() waits for the oldest step. What
// reads rank 0's results on the caller's thread waits for the queue first: prompt logprobs
// and pooled runs (their forward's job), the draft model (drain), allocation, graphs, LoRA
// installs (TpRanks::run), reset and destruction (drain). A job's error surfaces in the next
// wait — collect, drain, a step that reads rows back — never on the rank's thread.
#pragma once

#include <memory>

#include "engine/executor.h"
#include "engine/tp_ranks.h"

namespace tandem {

// Test hooks (the defaults are what every command runs).
struct TpExecutorOptions {
  // One rank broadcasts its sampled ids to itself and feeds from the received copy, as the
  // ranks of a group of two or more do: a one-GPU machine runs the NCCL broadcast too.
  bool broadcast_at_one_rank = false;
};

// `backend0` and `model0` are rank 0's (TpRanks::load), moved in beside the group; `draft`,
// when given, was loaded on `backend0`.
std::unique_ptr<Executor> make_tensor_parallel_executor(std::unique_ptr<Backend> backend0,
                                                        std::unique_ptr<Model> model0,
                                                        std::shared_ptr<TpRanks> ranks,
                                                        ExecutorConfig config = {},
                                                        std::unique_ptr<Model> draft = nullptr,
                                                        TpExecutorOptions options = {});

}  // namespace tandem
