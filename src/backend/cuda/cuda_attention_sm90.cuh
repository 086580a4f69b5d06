// Private to cuda_attention_prefill_sm90.cu: Hopper's warpgroup MMA (wgmma) on bf16, on
// the 128-byte-swizzled layout of cuda_sm90.cuh. Compiled for sm_90a only (the `a`
// features: wgmma, setmaxnreg); see CMakeLists.txt.
//
// Tiles of R rows x D bf16 columns are D/64 column blocks of R rows x 128 bytes
// (cuda_sm90.cuh). Strides (PTX ISA 9.7.15.5.1.2.1):
//   K-major (Q as A, K as B of S = Q·Kᵀ; rows = M or N, columns = K): SBO = 1024, LBO
//     unused; a k-step of 16 columns inside a 64-column block adds 32 bytes to the start
//     address; the next column block adds R·128.
//   MN-major (V as B of O = P·V, imm-trans-b = 1; rows = K = keys, columns = N = head
//     dim): SBO = 1024, the step between 8-key groups; LBO = R·128, the step between
//     64-column blocks along N. A k-step of 16 keys adds 16·128 bytes.
// K and V tiles thus share one physical layout: [D/64][keys][128 B swizzled].
//
// Register fragments (PTX ISA 9.7.15.5.1.1.1, m64nNk16): warp w of the warpgroup owns
// rows 16w..16w+15, and within the warp every fragment is the mma.m16n8k16 one
// (cuda_attention.cuh): accumulator d[nt][0..1] = row g, columns 8nt + 2c, +1;
// d[nt][2..3] = row g + 8; the A operand from registers is the m16n8k16 A fragment. So
// S's accumulator becomes P's A operand with no data movement (pack to bf16 pairs).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_sm90.cuh"

namespace tandem::attn::sm90 {

using namespace ::tandem::sm90;  // the shared layout, fences, barriers and TMA loads

__device__ __forceinline__ uint4 ld_shared_16(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

// Arrives on the mbarrier at bar (shared-window address) once all of this thread's earlier
// cp.async copies have landed, without blocking the thread (PTX ISA 9.7.9.25.4,
// cp.async.mbarrier.arrive; .noinc: the arrival is one of the count the barrier was
// initialized with).
__device__ __forceinline__ void cp_async_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// ---------------------------------------------------------------- wgmma (bf16 -> f32)
// The accumulator operands: TANDEM_WGMMA_ACC<n> (cuda_sm90.cuh).

// d (+)= A·B, A = desc_a (64 x 16, K-major), B = desc_b (16 x 64, K-major); scale_d == 0
// ignores d's old values.
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b,
                                          int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : TANDEM_WGMMA_ACC8(0)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// d (+)= A·B, A = desc_a (64 x 16, K-major), B = desc_b (16 x 128, K-major); scale_d == 0
// ignores d's old values.
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b,
                                          int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : TANDEM_WGMMA_ACC16(0)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// d += A·B, A from registers (the m16n8k16 A fragment of each warp's 16 rows), B =
// desc_b (16 x 64, MN-major: imm-trans-b = 1).
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[8][4], const uint32_t (&a)[4],
                                          uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
      : TANDEM_WGMMA_ACC8(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// d += A·B, A from registers (the m16n8k16 A fragment of each warp's 16 rows), B =
// desc_b (16 x 128, MN-major: imm-trans-b = 1).
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[16][4], const uint32_t (&a)[4],
                                          uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : TANDEM_WGMMA_ACC16(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// d += A·B, A from registers (the m16n8k16 A fragment of each warp's 16 rows), B =
// desc_b (16 x 256, MN-major: imm-trans-b = 1).
__device__ __forceinline__ void wgmma_rs_n256(float (&d)[32][4], const uint32_t (&a)[4],
                                          uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, 1, 1, 1, 1;\n"
      : TANDEM_WGMMA_ACC32(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// The wrappers by N, for templates.
template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (N == 64) wgmma_ss_n64(d, da, db, scale_d);
  else if constexpr (N == 128) wgmma_ss_n128(d, da, db, scale_d);
  else static_assert(N == 64 || N == 128, "S tiles are 64 or 128 keys");
}
template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (N == 64) wgmma_rs_n64(d, a, db);
  else if constexpr (N == 128) wgmma_rs_n128(d, a, db);
  else if constexpr (N == 256) wgmma_rs_n256(d, a, db);
  else static_assert(N == 64 || N == 128 || N == 256, "head dims 64, 128, 256");
}

}  // namespace tandem::attn::sm90
