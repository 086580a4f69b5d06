#include "backend/cuda/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace tandem {
namespace {

void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail("NCCL {}: {}", what, ncclGetErrorString(r));
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("NCCL communicator: {}: {}", what, cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::I32:
      return ncclInt32;
    default:
      fail("NCCL communicator: no collective over {} tensors", dtype_name(t));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device, cudaStream_t stream)
      : comm_(comm), rank_(rank), size_(size), device_(device), stream_(stream) {}
  ~NcclCommunicator() override {
    int current = 0;  // the destroying thread keeps its device
    const bool restore =
        cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(device_) == cudaSuccess;
    for (void* p : retired_) cudaFree(p);
    if (scratch_) cudaFree(scratch_);
    if (comm_) ncclCommDestroy(comm_);
    if (restore) cudaSetDevice(current);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // In order on the rank's stream; NCCL sums in its own fixed order (ring or tree), the
  // same on every rank.
  void all_reduce_sum(Tensor& x) override {
    nccl_ok(ncclAllReduce(x.data, x.data, size_t(x.numel()), nccl_type(x.dtype), ncclSum, live(),
                          stream_),
            "all_reduce");
  }

  // NCCL gathers rank blocks [N, R, C]; one strided copy per rank lays them out as columns.
  void all_gather_columns(Tensor& out, const Tensor& local) override {
    const size_t R = size_t(local.rows()), C = size_t(local.cols()), es = dtype_size(local.dtype);
    TANDEM_CHECK(out.dtype == local.dtype && size_t(out.rows()) == R &&
                     size_t(out.cols()) == C * size_t(size_),
                 "all_gather_columns: out {} for pieces {}", out.shape.str(), local.shape.str());
    char* blocks = static_cast<char*>(scratch(R * C * es * size_t(size_)));
    nccl_ok(ncclAllGather(local.data, blocks, R * C, nccl_type(local.dtype), live(), stream_),
            "all_gather");
    for (int r = 0; r < size_; r++)
      cuda_ok(cudaMemcpy2DAsync(static_cast<char*>(out.data) + size_t(r) * C * es,
                                C * es * size_t(size_), blocks + size_t(r) * R * C * es, C * es,
                                C * es, R, cudaMemcpyDeviceToDevice, stream_),
              "gathered columns");
  }

  // Host ids through a device buffer; returns once they are on the host.
  void broadcast(std::span<int32_t> ids, int root) override {
    const size_t bytes = ids.size() * sizeof(int32_t);
    void* buf = scratch(bytes);
    if (rank_ == root)
      cuda_ok(cudaMemcpyAsync(buf, ids.data(), bytes, cudaMemcpyHostToDevice, stream_), "ids up");
    nccl_ok(ncclBroadcast(buf, buf, ids.size(), ncclInt32, root, live(), stream_), "broadcast");
    cuda_ok(cudaMemcpyAsync(ids.data(), buf, bytes, cudaMemcpyDeviceToHost, stream_), "ids down");
    cuda_ok(cudaStreamSynchronize(stream_), "broadcast");
  }

  // In place, in order on the rank's stream; no wait (the feeding ops follow on the stream).
  void broadcast_ids(Tensor& ids, int root) override {
    TANDEM_CHECK(ids.device == Device::CUDA && ids.dtype == DType::I32 && ids.ndim() == 1,
                 "broadcast_ids: rank {} has {} {} ids, not [S] i32 on its GPU", rank_,
                 ids.shape.str(), dtype_name(ids.dtype));
    nccl_ok(
        ncclBroadcast(ids.data, ids.data, size_t(ids.numel()), ncclInt32, root, live(), stream_),
        "broadcast_ids");
  }

  void barrier() override {
    int32_t one = 1;
    broadcast(std::span<int32_t>(&one, 1), 0);
  }

  void abort() override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  void reset() override {
    if (!comm_) fail("NCCL communicator of rank {}: aborted; the group must be made again", rank_);
  }

 private:
  ncclComm_t live() const {
    if (!comm_) fail("NCCL communicator of rank {}: aborted after a failed step", rank_);
    return comm_;
  }
  // A device buffer of at least `bytes`, grown as needed (outside graph capture: the eager
  // warm-up before each recording grows it). A decode graph recorded earlier keeps the
  // address it captured, so an outgrown buffer is retired, not freed; growth at least
  // doubles, so the retired ones add up to less than the live one.
  void* scratch(size_t bytes) {
    if (bytes <= scratch_bytes_) return scratch_;
    cuda_ok(cudaSetDevice(device_), "set device");
    if (scratch_) retired_.push_back(scratch_);
    bytes = std::max(bytes, 2 * scratch_bytes_);
    cuda_ok(cudaMalloc(&scratch_, bytes), "scratch");
    scratch_bytes_ = bytes;
    return scratch_;
  }

  ncclComm_t comm_;
  int rank_, size_, device_;
  cudaStream_t stream_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<void*> retired_;  // outgrown scratch buffers that graphs may still write
};

}  // namespace

bool nccl_available() {
  return true;
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    std::span<Backend* const> backends) {
  TANDEM_CHECK(!backends.empty(), "make_nccl_communicators: no ranks");
  std::vector<int> devices;
  std::vector<cudaStream_t> streams;
  for (Backend* b : backends) {
    auto* gpu = dynamic_cast<CudaBackend*>(b);
    if (!gpu) fail("NCCL communicator: rank {} is on {}, not a GPU", devices.size(), b->name());
    devices.push_back(gpu->device_index());
    streams.push_back(gpu->stream());
  }
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1);  // NVLink multicast stays off
  std::vector<ncclComm_t> comms(devices.size());
  nccl_ok(ncclCommInitAll(comms.data(), int(devices.size()), devices.data()), "init");
  std::vector<std::unique_ptr<Communicator>> out;
  for (size_t r = 0; r < devices.size(); r++)
    out.push_back(std::make_unique<NcclCommunicator>(comms[r], int(r), int(devices.size()),
                                                     devices[r], streams[r]));
  return out;
}

}  // namespace tandem
