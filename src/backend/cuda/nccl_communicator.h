// The NCCL Communicator (backend/communicator.h) of GPU ranks: one per GPU, every collective
// enqueued on that rank's stream (the CUDA backend's, so a captured decode graph records
// them). Built only when CMake finds NCCL's header and library (TANDEM_NCCL, beside
// TANDEM_CUDA); TANDEM_HAS_NCCL is then defined. Not wired to an executor yet
// (docs/tensor-parallel.md: "Not done yet").
//
// tandem sets NCCL_NVLS_ENABLE=0 before it makes a communicator: NVLink multicast (NVLS)
// stays off on every machine tandem runs on.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/communicator.h"

namespace tandem {

// One process, one thread per GPU: the communicators of `devices` (rank r on devices[r]),
// each enqueueing on streams[r] (a cudaStream_t). Throws tandem::Error with NCCL's message
// when NCCL cannot make them.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(std::span<const int> devices,
                                                                   std::span<void* const> streams);

}  // namespace tandem
