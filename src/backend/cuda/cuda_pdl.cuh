// Programmatic dependent launch (sm_90): a kernel launched with `launch_pdl` may start while
// the kernel before it on the stream is still running, so its launch latency and any work
// that reads nothing the earlier kernels write (a GEMV streaming its weights) overlap the
// tail of the kernel before. The few-row decode step chains its kernels this way: weights
// for the next GEMV are in flight while the norm, RoPE or attention between them runs.
//
// The contract for a kernel launched with `launch_pdl`:
//   - every thread calls `pdl_wait()` before touching memory that an earlier kernel on the
//     stream writes, or that it writes and an earlier kernel reads;
//   - every thread calls it before it exits, so the kernel never completes before the one
//     it depends on (which keeps a chain of such kernels ordered end to end);
//   - what no kernel of the step writes may be read before the wait: weights, the step's
//     metadata (positions, row starts, block table, slots; uploaded before the step's
//     first kernel), and the KV cache of earlier steps (a few-token decode attention
//     loads it while qkv_to_cache writes this step's keys, which it loads after);
//   - `pdl_launch_next()` may come anywhere: it only lets the next kernel be scheduled.
//     tandem's kernels call it first thing, before they wait, so the GEMV after a small
//     kernel can start streaming its weights as soon as the SMs have room for it.
// A kernel launched the ordinary way (cuBLAS, <<<>>>) is ordered after all of this as
// usual, and both instructions are no-ops in a kernel launched without the attribute.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

namespace tandem::cuda {

// Waits until the kernels this one depends on have completed and their writes are visible.
__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// Lets the next kernel on the stream launch once every CTA of this one has called it.
__device__ __forceinline__ void pdl_launch_next() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialization
// attribute when pdl_enabled(). Throws naming `what` if the launch fails.
template <typename... Params, typename... Args>
void launch_pdl(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = pdl_enabled() ? 1 : 0;
  cuda_check(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...), what);
}

}  // namespace tandem::cuda
