// The weight stream: what every few-row linear that runs at the speed of HBM shares
// (cuda_gemv.cu: bf16 weights, 1–2 rows; cuda_gemv_fp8.cu: e4m3 weights, 1–8 rows). A stream
// for another weight format (a quantized block type, say) plugs in the same way: it names
// its ring's geometry, opens the kernel with open_weight_stream and writes only its
// consumers' arithmetic.
//
// The shape (the measurements behind it: the top of cuda_gemv.cu):
//   - one CTA per SM at most, each owning a contiguous run of row groups (kStreamRows weight
//     rows each; StreamWork), 152 KB of shared memory so that no second stream CTA fits
//     beside it but a few-token decode-attention CTA does;
//   - a producer warp (warp kStreamConsumerWarps) copies each stage, one row per lane, with
//     1-D bulk copies completing on the stage's `full` mbarrier; kStreamConsumerWarps
//     consumer warps read it and arrive on its `empty` mbarrier (one arrival a warp);
//   - stage i of a CTA is chunk i % chunks of row group i / chunks, in slot i % stages;
//   - launched with programmatic dependent launch: the producer fills the ring before the
//     kernel before ends (weights are never written by a step); the consumers wait for it
//     (pdl_wait) before they read x or write out.
//
// A consumer's loop over the CTA's stages:
//   for (int i = 0; i < ring.wk.steps; i++) {
//     const Elem* stage = ring.wait(i);          // rows of the stage, kRowStride apart
//     ... the warp's part of the products ...
//     ring.release(i, lane);
//     if (i % ring.wk.chunks == ring.wk.chunks - 1) ... row group i / chunks is complete ...
//   }
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_mbarrier.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem::cuda {

inline constexpr int kStreamRows = 16;  // weight rows per stage
inline constexpr int kStreamConsumerWarps = 16;
inline constexpr int kStreamThreads = (kStreamConsumerWarps + 1) * 32;  // + the producer
inline constexpr int kStreamConsumers = kStreamConsumerWarps * 32;
inline constexpr int kStreamCtaSmem = 152 * 1024;  // more than half an SM's 228 KB
inline constexpr int kStreamMaxStages = 8;
inline constexpr int kStreamBarrierBytes = 128;  // full[kStreamMaxStages], empty[...]
static_assert(kStreamCtaSmem > 114 * 1024, "more than half an SM's 228 KB");
static_assert(2 * kStreamMaxStages * 8 <= kStreamBarrierBytes, "the barriers fit their bytes");

// Which weight rows a stream's CTA takes: a contiguous run of row groups (kRows rows each,
// split evenly over the grid), every group in ceil(K / kChunk) stages.
struct StreamWork {
  int N, K, stages;
  int chunks;              // stages per row group: ceil(K / kChunk)
  int group_begin, steps;  // first row group, stages in all
};

template <int kChunk, int kRows>
__device__ __forceinline__ StreamWork stream_work(int N, int K, int stages) {
  StreamWork wk{N, K, stages, (K + kChunk - 1) / kChunk, 0, 0};
  const int64_t groups = (int64_t(N) + kRows - 1) / kRows;
  wk.group_begin = int(int64_t(blockIdx.x) * groups / gridDim.x);
  const int group_end = int(int64_t(blockIdx.x + 1) * groups / gridDim.x);
  wk.steps = (group_end - wk.group_begin) * wk.chunks;
  return wk;
}

// A stream's ring over dynamic shared memory: barriers, then `stages` stages of kStreamRows
// rows of kChunk elements, kRowStride elements apart (> kChunk pads rows against bank
// conflicts). Elem is the unit the weight rows are counted in (bf16, or bytes); a row's
// bytes and every stage's start are multiples of 16 (bulk copies): K · sizeof(Elem) % 16 == 0.
template <typename Elem, int kChunk, int kRowStride = kChunk>
struct WeightRing {
  static constexpr int kChunkElems = kChunk;
  static constexpr int kStageElems = kStreamRows * kRowStride;
  static constexpr int kStageBytes = kStageElems * int(sizeof(Elem));
  static_assert(kRowStride >= kChunk && (kRowStride * sizeof(Elem)) % 16 == 0,
                "rows of a stage start 16-byte aligned");

  uint64_t* full;
  uint64_t* empty;
  Elem* slots;  // [stages][kStreamRows][kRowStride]
  StreamWork wk;

  // The first byte after the ring (where a kernel keeps x and its sums).
  __device__ __forceinline__ unsigned char* end() const {
    return reinterpret_cast<unsigned char*>(slots + wk.stages * kStageElems);
  }

  // Stage i's rows, once they have landed.
  __device__ __forceinline__ const Elem* wait(int i) const {
    const int slot = i % wk.stages;
    mbar_wait(&full[slot], uint32_t(i / wk.stages) & 1u);
    return slots + slot * kStageElems;
  }

  // This warp is done with stage i.
  __device__ __forceinline__ void release(int i, int lane) const {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[i % wk.stages]);
  }

  // The producer warp: every stage of the CTA's rows of w [N, K], each into its slot once
  // the consumers released the slot's previous stage. Lane r copies row r.
  __device__ __forceinline__ void produce(const Elem* w, int lane) const {
    for (int i = 0; i < wk.steps; i++) {
      const int slot = i % wk.stages;
      if (i >= wk.stages) mbar_wait(&empty[slot], uint32_t(i / wk.stages - 1) & 1u);
      const int n0 = (wk.group_begin + i / wk.chunks) * kStreamRows;
      const int k0 = (i % wk.chunks) * kChunk;
      const int rows = min(kStreamRows, wk.N - n0), cols = min(kChunk, wk.K - k0);
      const uint32_t bytes = uint32_t(cols) * uint32_t(sizeof(Elem));
      if (lane == 0) mbar_arrive_expect(&full[slot], uint32_t(rows) * bytes);
      __syncwarp();
      if (lane < rows)
        bulk_copy(slots + slot * kStageElems + lane * kRowStride,
                  w + int64_t(n0 + lane) * wk.K + k0, bytes, &full[slot]);
    }
  }
};

// The opening of a stream kernel over w [N, K] with `stages` ring stages in `smem` (the
// kernel's dynamic shared memory, 128-byte aligned): sets up the ring and its barriers,
// lets the next kernel launch (PDL) and splits the rows over the CTAs. The producer warp
// then streams all of its CTA's stages and gets false: the kernel returns. The consumer
// warps wait for the kernel before (pdl_wait) and get true.
template <typename Ring, typename Elem>
__device__ __forceinline__ bool open_weight_stream(Ring& ring, unsigned char* smem, const Elem* w,
                                                   int N, int K, int stages) {
  ring.full = reinterpret_cast<uint64_t*>(smem);
  ring.empty = ring.full + kStreamMaxStages;
  ring.slots = reinterpret_cast<Elem*>(smem + kStreamBarrierBytes);
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; s++) {
      mbar_init(&ring.full[s], 1);
      mbar_init(&ring.empty[s], kStreamConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  pdl_launch_next();
  ring.wk = stream_work<Ring::kChunkElems, kStreamRows>(N, K, stages);
  if (int(threadIdx.x) / 32 == kStreamConsumerWarps) {
    ring.produce(w, int(threadIdx.x) % 32);
    pdl_wait();  // the contract: no thread ends before the kernel before has
    return false;
  }
  pdl_wait();
  return true;
}

// ---------------------------------------------------------------- host side

// Ring stages that fit beside `other_bytes` of the CTA's shared memory (x, partial sums),
// at most kStreamMaxStages (may be below the 3 a stream needs: the caller's fits() checks).
inline int64_t stream_ring_stages(int64_t other_bytes, int stage_bytes) {
  return std::min<int64_t>(kStreamMaxStages,
                           (kStreamCtaSmem - kStreamBarrierBytes - other_bytes) / stage_bytes);
}

// Launches a stream kernel over N weight rows: at most one CTA per SM, kStreamThreads
// threads, the barriers, `stages` stages of `stage_bytes` and `other_bytes` of dynamic
// shared memory, with PDL. smem_ready: the kernel's own flag word (allow_dynamic_smem).
template <typename... Params, typename... Args>
void launch_weight_stream(const char* what, void (*kernel)(Params...),
                          std::atomic<uint64_t>& smem_ready, const CudaBackend& be, int64_t N,
                          int stages, int stage_bytes, int64_t other_bytes, Args... args) {
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), kStreamCtaSmem, smem_ready, what);
  const int64_t groups = ceil_div(N, int64_t(kStreamRows));
  const unsigned grid = unsigned(std::min<int64_t>(groups, be.props().multiProcessorCount));
  const size_t smem = size_t(kStreamBarrierBytes + int64_t(stages) * stage_bytes + other_bytes);
  launch_pdl(what, kernel, dim3(grid), dim3(kStreamThreads), smem, be.stream(), args...);
}

}  // namespace tandem::cuda
