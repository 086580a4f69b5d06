// The backend's pieces of tensor parallelism that are not Backend ops (docs/tensor-parallel.md):
// free functions over a Backend, so backend.h — which every file includes — stays as it is.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace tandem {

// Makes `be`'s device the calling thread's (CUDA: cudaSetDevice; nothing for the CPU). A
// thread other than the one that made the backend calls it before its first op: each GPU
// rank's own thread (engine/tp_ranks.h).
void bind_thread(Backend& be);

// The vocabulary-split embedding's ids (model/tp_slices.h): local[t] = ids[t] − first when
// that lies in [0, rows), else rows (the rank's zero row). On the device for CUDA (so a
// captured decode graph holds it; cuda/cuda_vocab_slice.cu); host-memory backends map the
// ids on the host, its CPU twin.   local [T] i32, ids [T] i32
void vocab_slice_ids(Backend& be, Tensor& local, const Tensor& ids, int64_t first, int64_t rows);

// The CUDA halves of the two above (cuda/cuda_vocab_slice.cu; no_cuda/ fails).
void cuda_bind_thread(Backend& be);
void cuda_vocab_slice_ids(Backend& be, Tensor& local, const Tensor& ids, int64_t first,
                          int64_t rows);

}  // namespace tandem
