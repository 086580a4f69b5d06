// Built without CUDA (TANDEM_CUDA=OFF or no nvcc): the CPU backend is the only one.
#include "backend/backend.h"
#include "core/error.h"

namespace tandem {

std::unique_ptr<Backend> make_cuda_backend(int, const CudaOptions&) {
  fail("this tandem was built without CUDA (rebuild with -DTANDEM_CUDA=ON where nvcc exists)");
}

int cuda_device_count() { return 0; }

}  // namespace tandem
