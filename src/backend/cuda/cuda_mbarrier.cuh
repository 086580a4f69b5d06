// mbarriers and 1-D bulk copies (sm_90), for the weight streams (cuda_weight_stream.cuh) and
// the other producer/consumer kernels: a producer copies global memory into shared-memory
// stages that complete on an mbarrier; consumers wait on a stage's phase and release it.
#pragma once

#include <cstdint>

namespace tandem::cuda {

__device__ __forceinline__ uint32_t mbar_smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mbar_smem_addr(bar)), "r"(arrivals));
}

// Until the phase of the mbarrier at shared-window address `addr` with parity `parity`
// has completed.
__device__ __forceinline__ void mbar_wait(uint32_t addr, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  mbar_wait(mbar_smem_addr(bar), parity);
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mbar_smem_addr(bar)) : "memory");
}

// Arrives and adds `bytes` to the transactions the current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mbar_smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// dst[0, bytes) = src[0, bytes) through the bulk-copy engine; completes on `bar`.
// bytes % 16 == 0, both addresses 16-byte aligned.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(mbar_smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(mbar_smem_addr(bar))
      : "memory");
}

}  // namespace tandem::cuda
