// The vocabulary-split embedding's ids on the device (backend/tp_ops.h; CPU twin: its host
// path, tp_ops.cpp), and binding a rank's thread to its GPU. A rank of a tensor-parallel group
// holds rows [first, first + rows) of the embedding and a zero row at `rows`; every id outside its
// rows reads that zero row, so the all-reduce of the ranks' lookups is the whole lookup. On the
// device, the step's ids never visit the host: a captured decode graph holds the lookup.
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_pdl.cuh"
#include "backend/tp_ops.h"

namespace tandem {
namespace {

//   local [T], ids [T] i32. One thread per id.
__global__ void vocab_slice_ids_kernel(int32_t* __restrict__ local, const int32_t* __restrict__ ids,
                                       int64_t T, int64_t first, int64_t rows) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();  // ids may be written by the kernel before (fed tokens)
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const int64_t id = int64_t(ids[t]) - first;
  local[t] = int32_t(id >= 0 && id < rows ? id : rows);
}

}  // namespace

void cuda_bind_thread(Backend& be) {
  cuda_check(cudaSetDevice(static_cast<CudaBackend&>(be).device_index()),
             "cudaSetDevice (rank thread)");
}

void cuda_vocab_slice_ids(Backend& be, Tensor& local, const Tensor& ids, int64_t first,
                          int64_t rows) {
  cuda::check_tensor(local, DType::I32, "vocab_slice_ids", "local");
  cuda::check_tensor(ids, DType::I32, "vocab_slice_ids", "ids");
  TANDEM_CUDA_REQUIRE(local.numel() == ids.numel(), "vocab_slice_ids: local " + local.shape.str() +
                                                        " for ids " + ids.shape.str());
  TANDEM_CUDA_REQUIRE(rows >= 0 && rows < (int64_t(1) << 31),
                      "vocab_slice_ids: rows " + std::to_string(rows) + " out of range");
  const int64_t T = ids.numel();
  if (T == 0) return;
  const int threads = 128;
  cuda::launch_pdl("vocab_slice_ids_kernel", &vocab_slice_ids_kernel,
                   dim3(unsigned((T + threads - 1) / threads)), dim3(threads), 0,
                   static_cast<CudaBackend&>(be).stream(), local.ptr<int32_t>(), ids.ptr<int32_t>(),
                   T, first, rows);
}

}  // namespace tandem
