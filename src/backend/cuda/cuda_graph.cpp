// CUDA graphs over the backend's one stream. Capture is "relaxed" so that a first-time
// allocation inside a captured step is allowed (the runner warms every graph up eagerly
// first, so in practice the caching allocator serves every request from its free lists).
// Addresses recorded in a graph stay valid because the allocator never gives a block
// handed out during a capture back to the driver (cuda_memory.h); temporaries freed
// during capture may be reused by later ops, which is safe because everything runs in
// stream order.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"
#include "core/error.h"

namespace tandem {

void CudaBackend::capture_begin() {
  cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  allocator_->set_capturing(true);
}

std::shared_ptr<void> CudaBackend::capture_end() {
  allocator_->set_capturing(false);
  cudaGraph_t graph = nullptr;
  cuda_check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  cuda_check(err, "cudaGraphInstantiate");
  return std::shared_ptr<void>(exec, [](void* e) { cudaGraphExecDestroy(cudaGraphExec_t(e)); });
}

void CudaBackend::replay(const std::shared_ptr<void>& graph) {
  TANDEM_CHECK(graph != nullptr, "replay: no graph");
  cuda_check(cudaGraphLaunch(cudaGraphExec_t(graph.get()), stream_), "cudaGraphLaunch");
}

}  // namespace tandem
