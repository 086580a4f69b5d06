// The NCCL Communicator (backend/communicator.h) of GPU ranks: one per GPU, every collective
// enqueued on that rank's CUDA backend stream (so a captured decode graph records them).
// Declared in every build: the real one (cuda/nccl_communicator.cpp) is linked only where
// CMake finds NCCL's header and library (TANDEM_NCCL beside TANDEM_CUDA); elsewhere
// no_nccl/nccl_absent.cpp answers nccl_available() == false and refuses to make one. No
// other file depends on which was linked, so toggling -DTANDEM_NCCL rebuilds one object.
//
// tandem sets NCCL_NVLS_ENABLE=0 before it makes a communicator: NVLink multicast (NVLS)
// stays off on every machine tandem runs on.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"

namespace tandem {

// True when this build links NCCL (make_nccl_communicators can succeed).
bool nccl_available();

// One process, one thread per GPU: the communicators of `backends` (rank r on
// backends[r], CUDA backends of distinct GPUs), each enqueueing on its backend's stream.
// Throws tandem::Error with NCCL's message when NCCL cannot make them, and when the build
// has no NCCL.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    std::span<Backend* const> backends);

}  // namespace tandem
