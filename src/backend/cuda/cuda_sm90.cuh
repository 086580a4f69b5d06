// Hopper (sm_90a) building blocks shared by the warp-specialized kernels (the prefill
// attention, cuda_attention_prefill_sm90.cu, and the FP8 GEMM, cuda_gemm_fp8_sm90.cu):
// the 128-byte-swizzled shared-memory layout and its wgmma descriptors, the wgmma group
// fences and waits, named barriers, setmaxnreg and TMA tensor loads. Included only by
// *_sm90.cu files (compiled for sm_90a alone: the `a` features; see CMakeLists.txt).
//
// Layout (PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix Layout", 128-byte swizzle): a tile
// of R rows x 128 bytes (64 bf16 or 128 e4m3 columns) is one column block; wider tiles are
// several blocks, block cb starting at cb·R·128 bytes. Row r starts at r·128 and its
// 16-byte chunk c sits at chunk position c ^ (r mod 8). The swizzle is a function of the
// absolute shared address (bits 4-6 XOR bits 7-9), so every tile and column block starts
// on a 1024-byte boundary (8 rows x 128 bytes, one swizzle atom) and descriptors leave the
// matrix base offset (bits 49-51) at 0. A TMA box of 128-byte rows with
// CU_TENSOR_MAP_SWIZZLE_128B lands in exactly this layout.
//
// Descriptors (PTX ISA 9.7.15.5.1.2.2, "Matrix Descriptor Format"): start address >> 4
// in bits 0-13, leading byte offset (LBO) >> 4 in 16-29, stride byte offset (SBO) >> 4
// in 32-45, swizzle mode in 62-63 (1 = 128-byte). For a K-major operand (rows = M or N,
// the 128 bytes of a row along K): SBO = 1024, the step between 8-row groups; LBO unused
// (set to 1); a k-step of 32 bytes (16 bf16 or 32 e4m3 columns: one wgmma's K) inside a
// column block adds 32 bytes to the start address.
#pragma once

#include <cuda.h>

#include <cstdint>

// The accumulator operands of the wgmma wrappers (cuda_attention_sm90.cuh,
// cuda_wgmma_e4m3.cuh): TANDEM_WGMMA_ACC<n>(i) lists d[i..i+n-1][0..3] as "+f" operands, in
// the order of the instruction's registers (d[nt][e] is register 4·nt + e of the list).
// Macros because an asm statement's operands must be written out.
#define TANDEM_WGMMA_ACC1(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define TANDEM_WGMMA_ACC2(i) TANDEM_WGMMA_ACC1(i), TANDEM_WGMMA_ACC1((i) + 1)
#define TANDEM_WGMMA_ACC4(i) TANDEM_WGMMA_ACC2(i), TANDEM_WGMMA_ACC2((i) + 2)
#define TANDEM_WGMMA_ACC8(i) TANDEM_WGMMA_ACC4(i), TANDEM_WGMMA_ACC4((i) + 4)
#define TANDEM_WGMMA_ACC16(i) TANDEM_WGMMA_ACC8(i), TANDEM_WGMMA_ACC8((i) + 8)
#define TANDEM_WGMMA_ACC32(i) TANDEM_WGMMA_ACC16(i), TANDEM_WGMMA_ACC16((i) + 16)

namespace tandem::sm90 {

// Byte offset of chunk c (0..7) of row r inside a 128-byte-swizzled column block.
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return uint32_t(r * 128 + ((c ^ (r & 7)) << 4));
}

// A shared-memory matrix descriptor with 128-byte swizzle, SBO 1024 bytes.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo_bytes) {
  return uint64_t((addr & 0x3FFFFu) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         (uint64_t(1024u >> 4) << 32) | (uint64_t(1) << 62);
}

// Orders this thread's register accesses before the next wgmma (PTX: wgmma.fence).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving reads or writes of an accumulator across a wgmma wait
// or fence: the asm statements above name no registers, so without this it could read
// an accumulator before the wgmma that writes it has completed.
template <int ROWS>
__device__ __forceinline__ void fence_operands(float (&d)[ROWS][4]) {
#pragma unroll
  for (int i = 0; i < ROWS; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) asm volatile("" : "+f"(d[i][e])::"memory");
}
template <int ROWS>
__device__ __forceinline__ void fence_operands(uint32_t (&d)[ROWS][4]) {
#pragma unroll
  for (int i = 0; i < ROWS; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) asm volatile("" : "+r"(d[i][e])::"memory");
}

// Generic-proxy writes (st.shared, cp.async) of this thread become visible to the async
// proxy (wgmma's operand reads); issued by the writer after its writes completed and
// before it signals the readers.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Named barriers (bar.sync / bar.arrive): `threads` counts both the waiting and the
// arriving threads, a multiple of 32.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Warp-specialized register budgets (whole warpgroup, PTX: setmaxnreg).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// ---------------------------------------------------------------- TMA

// One box of a 2-d tensor map at (c0 innermost, c1) into dst, completing on the mbarrier
// at bar (both shared-window addresses). Coordinates past the tensor read as zeros, and
// those bytes count towards the barrier's transactions too.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The same for a 3-d map at (c0 innermost, c1, c2).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

}  // namespace tandem::sm90
