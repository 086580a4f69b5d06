// Timing for the CUDA kernel benches: the median over repetitions of a batch of calls,
// timed with CUDA events on the backend's stream and with the host clock (the gap between
// them is launch overhead). Only included where the CUDA backend is built.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace tandem::bench {

constexpr int kRepetitions = 7;

struct Timing {
  double event_s, host_s;  // seconds per call: CUDA events, host clock
};

inline Timing time_calls(CudaBackend& be, int calls, const std::function<void()>& fn) {
  fn();  // warm-up (and kernel attribute setup)
  be.synchronize();
  cudaEvent_t start, stop;
  cuda_check(cudaEventCreate(&start), "cudaEventCreate");
  cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> ev, host;
  for (int r = 0; r < kRepetitions; r++) {
    const auto t0 = std::chrono::steady_clock::now();
    cuda_check(cudaEventRecord(start, be.stream()), "cudaEventRecord");
    for (int i = 0; i < calls; i++) fn();
    cuda_check(cudaEventRecord(stop, be.stream()), "cudaEventRecord");
    be.synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    ev.push_back(ms * 1e-3 / calls);
    host.push_back(std::chrono::duration<double>(t1 - t0).count() / calls);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ev.begin(), ev.end());
  std::sort(host.begin(), host.end());
  return {ev[ev.size() / 2], host[host.size() / 2]};
}

// Per call: `calls` calls captured in one graph, its replays timed (after an eager
// warm-up call, which also creates what the op keeps between calls).
inline Timing time_graph(CudaBackend& be, int calls, const std::function<void()>& fn) {
  fn();
  be.synchronize();
  be.capture_begin();
  for (int i = 0; i < calls; i++) fn();
  const std::shared_ptr<void> graph = be.capture_end();
  Timing t = time_calls(be, 1, [&] { be.replay(graph); });
  t.event_s /= calls;
  t.host_s /= calls;
  return t;
}

}  // namespace tandem::bench
