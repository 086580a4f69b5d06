// Communicator: the collectives tensor-parallel ranks need (docs/tensor-parallel.md), one
// object per rank. Every rank of a group calls the same collectives in the same order with
// tensors of the same shape; a call returns once every rank has made it. The in-memory
// implementation (cpu/cpu_communicator.h) serves CPU ranks that are threads of one process;
// the NCCL one (cuda/nccl_communicator.h) serves GPUs.
//
// Reductions sum in rank order (rank 0 + rank 1 + ... + rank N−1, left to right), so a
// result does not depend on which rank arrives first.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace tandem {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // x = Σ_r x_r, in place, on every rank.   x: the same shape on every rank
  virtual void all_reduce_sum(Tensor& x) = 0;
  // out = [x_0 | x_1 | ... | x_{N−1}] along the columns, on every rank.
  //   local [R, C], out [R, N·C]
  virtual void all_gather_columns(Tensor& out, const Tensor& local) = 0;
  // ids = root's ids, on every rank (the sampled tokens: rank 0 samples).
  virtual void broadcast(std::span<int32_t> ids, int root = 0) = 0;
  // ids = root's ids, on every rank, each in its own tensor on its own device: the sampled
  // tokens without a host round trip. On a GPU it is enqueued on the rank's stream and
  // returns at once (the ids are there for the ops enqueued after it).   ids [S] i32
  virtual void broadcast_ids(Tensor& ids, int root = 0) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;
  // A rank that failed between collectives: every rank waiting in one, or entering one
  // later, throws tandem::Error instead of waiting forever. reset() clears it (between
  // steps, when no rank is inside a collective).
  virtual void abort() = 0;
  virtual void reset() = 0;
};

// Which slice of a tensor-parallel group a model holds (set by load_model's caller). size 1:
// the whole model, no communicator.
struct TpShard {
  int rank = 0;
  int size = 1;
  Communicator* comm = nullptr;  // of this rank; required when size > 1

  bool sharded() const { return size > 1; }
};

}  // namespace tandem
