// Built without CUDA (TANDEM_CUDA=OFF or no nvcc): the CPU backend is the only one.
#include "backend/backend.h"
#include "backend/tp_ops.h"
#include "core/error.h"

namespace tandem {

std::unique_ptr<Backend> make_cuda_backend(int, const CudaOptions&) {
  fail("this tandem was built without CUDA (rebuild with -DTANDEM_CUDA=ON where nvcc exists)");
}

int cuda_device_count() { return 0; }

void cuda_bind_thread(Backend&) {}  // no CUDA backend exists to call it

void cuda_vocab_slice_ids(Backend& be, Tensor&, const Tensor&, int64_t, int64_t) {
  fail("vocab_slice_ids: backend {} needs CUDA, and this tandem was built without it", be.name());
}

}  // namespace tandem
