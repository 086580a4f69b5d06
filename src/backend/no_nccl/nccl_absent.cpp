// Built without NCCL (TANDEM_CUDA=OFF, TANDEM_NCCL=OFF, or NCCL not found): no GPU
// communicator (backend/cuda/nccl_communicator.h).
#include "backend/cuda/nccl_communicator.h"
#include "core/error.h"

namespace tandem {

bool nccl_available() {
  return false;
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    std::span<Backend* const> backends) {
  fail(
      "tensor parallelism on {} GPU rank(s) needs NCCL: this tandem was built without it "
      "(rebuild with -DTANDEM_CUDA=ON -DTANDEM_NCCL=ON where nccl.h and libnccl are found, or "
      "set NCCL_ROOT)",
      backends.size());
}

}  // namespace tandem
