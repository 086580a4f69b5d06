// The FP8 (e4m3) GEMM on Hopper for linears of 9 to 512 rows (cuda_gemm_fp8.h says what it
// computes and takes; the plan rule and Auto's row limits are cuda_gemm_fp8_plan.cpp): D =
// W·xqᵀ on wgmma m64nNk32 e4m3 x e4m3 -> f32, the weights as the M side (64 output
// channels per consumer warpgroup), the tokens as the N side (the plan's token tile, up
// to 256). It exists because cuBLASLt's e4m3 GEMM is slow on decode batches: at 16-64
// rows it was slower than the bf16 GEMM it replaces on o and down (down 64: 45.1 vs 35.5
// µs). Measured on the H200 (bench/RESULTS.md, 2026-12-02; µs with x's quantize kernel,
// Llama-3.1-8B shapes, this kernel vs cuBLASLt e4m3): faster at 16-64 rows (gate_up 64:
// 39.7 vs 47.2, down 64: 34.9 vs 45.1, qkv 64 in run1: 15.1 vs 17.3; o even, 16.8 vs 16.5)
// and for down to 128 (40.9 vs 44.7); slower from 96-192 rows on, so Auto gives it only
// those steps.
//
// A CTA is three warpgroups and takes a run of (tile, k-block) units (Fp8WgmmaWork): one
// slice of K of one tile (the plan's splits):
//   - warpgroup 0, the producer: one thread walks the run and issues TMA boxes of 128
//     K-columns (bytes) of the tile's weight rows (128) and token rows into a ring of
//     stages in wgmma's 128-byte-swizzled layout (cuda_sm90.cuh), each stage completing
//     on its `full` mbarrier by transaction bytes (a box's bytes past the matrix are zeros
//     and count too, so N, T and K need not be multiples of the tile); it refills a stage
//     once the eight consumer warps have released it (`empty`); its other threads leave;
//   - warpgroups 1 and 2, the consumers: each takes 64 weight rows of every stage and
//     runs the main loop of cuda_gemm_fp8_consume.cuh over each segment of the run (the
//     k-blocks of one tile: one segment under the plan's splits, though the loop takes
//     runs across tiles too), then finishes the segment.
//
// Finishing a segment (each consumer warpgroup on its own 64 channels;
// cuda_gemm_fp8_epilogue.cuh):
//   - a whole tile: out = acc · s_x · s_w (+ bias), staged through the warpgroup's own
//     shared rows ([token][64 channels] f32, 68 floats apart: conflict-free fragment
//     stores) in chunks of 32 tokens, written as whole rows of 64 channels, bf16 or f32;
//   - a part of a cut tile (parts in CTA order; part 0 ends the first CTA's run, the others
//     start the following runs): part 0 checks the tile's arrival counter and, if every
//     other part has arrived, adds their f32 partial sums (fragment order in a workspace
//     slot per CTA, read through L2) to its own in part order and writes the output.
//     Otherwise, and for the other parts, the part writes its sums to its slot and counts
//     itself in; the last to arrive adds all of them in part order and writes the output.
//     The sum is the same bits whoever finishes (no float atomics, a fixed order), and the
//     finisher sets the counter back to 0, so the counters (the backend's zeroed buffer,
//     two per CTA) are zero between launches. Ordering as in the decode attention's split
//     merge (cuda_attention_decode.cuh): stores, named barrier, one thread's acq_rel
//     atomic; the finisher's acquire, barrier, ld.cg reads.
//
// Launched with programmatic dependent launch (cuda_pdl.cuh): the producer issues the
// first stages' weight boxes before it waits for the kernel before (weights are never
// written by a step), and x's boxes after; the consumers wait before reading anything.
//
// Tried on the H200 and removed (run2: five more schedules passing the same tests; the
// geomean speed vs cuBLASLt over 16-512 rows, this kernel's 0.84x; µs vs this kernel):
//   - stream-K (a CTA per SM, each an equal share of all the (tile, k-block) units across
//     tiles): 0.86x, level with cuBLASLt to fewer rows (qkv 32, not 64);
//   - stream-K + ping-pong consumers (the two warpgroups issuing in turn): 0.87x, better for
//     gate_up at 192-512 rows (192: 60.7 vs 63.6, 512: 135.5 vs 194.1), still behind
//     cuBLASLt from 256 (74.3 vs 56.4);
//   - stream-K + two fresh accumulators (wait_group 1; with two groups per k-block ptxas
//     serializes the wgmmas, so only tiles up to 128 tokens): 0.87x, best nowhere;
//   - the same with every tile at most 128 tokens: 0.90x, better for o and down at 192-256
//     rows (o 256: 23.2 vs 31.6, down 256: 50.3 vs 54.9), level with cuBLASLt only for
//     down at 192 (44.9 vs 45.2);
//   - stream-K + clusters of two sharing the token tile by TMA multicast: 0.67x, the slowest.
#include <atomic>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_gemm_fp8_consume.cuh"
#include "backend/cuda/cuda_gemm_fp8_epilogue.cuh"
#include "backend/cuda/cuda_linear_fp8.cuh"
#include "backend/cuda/cuda_mbarrier.cuh"
#include "backend/cuda/cuda_pdl.cuh"
#include "backend/cuda/cuda_sm90.cuh"
#include "backend/cuda/cuda_tensor_map.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "cuda_gemm_fp8_sm90.cu needs sm_90a (wgmma, setmaxnreg): see CMakeLists.txt"
#endif

namespace tandem {

namespace {

using cuda::bf16;
using namespace fp8gemm;

constexpr int kThreads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "one CTA's registers");
constexpr int kCounterCapacity = 2 * kFp8WgmmaMaxCutCtas;

// ---------------------------------------------------------------- producer

// The position of a unit in the output: k-block, channel tile, token tile.
struct UnitCursor {
  int kb, ct, tt;
  __device__ __forceinline__ UnitCursor(int u, int k_blocks, int token_tiles) {
    const int tile = u / k_blocks;
    kb = u - tile * k_blocks;
    ct = tile / token_tiles;
    tt = tile - ct * token_tiles;
  }
  __device__ __forceinline__ void next(int k_blocks, int token_tiles) {
    if (++kb < k_blocks) return;
    kb = 0;
    if (++tt < token_tiles) return;
    tt = 0;
    ct++;
  }
};

// The thread that issues every TMA box of the CTA's run [u0, u1) into the ring at `base`.
template <int BN>
__device__ __forceinline__ void produce(const CUtensorMap* map_w, const CUtensorMap* map_x,
                                        uint64_t* full, uint64_t* empty, uint32_t base,
                                        const GemmParams& p, int u0, int u1) {
  constexpr uint32_t kStageBytes = Ring<BN>::kStageBytes;
  sm90::prefetch_tensor_map(map_w);
  sm90::prefetch_tensor_map(map_x);
  const int kb_n = p.work.k_blocks, tt_n = p.token_tiles, stages = p.stages;
  const int n = u1 - u0, first = n < stages ? n : stages;
  auto stage = [&](int s) { return base + uint32_t(s) * kStageBytes; };
  auto bar = [&](int s) { return cuda::mbar_smem_addr(&full[s]); };
  auto load_w = [&](int s, const UnitCursor& at) {
    sm90::tma_load_2d(stage(s), map_w, at.kb * kBlockK, at.ct * kFp8WgmmaChannelTile, bar(s));
  };
  auto load_x = [&](int s, const UnitCursor& at) {
    sm90::tma_load_2d(stage(s) + kATileBytes, map_x, at.kb * kBlockK, at.tt * BN, bar(s));
  };
  // The first round's weights before waiting for the kernel before: a step never writes them.
  UnitCursor at(u0, kb_n, tt_n);
  for (int i = 0; i < first; i++, at.next(kb_n, tt_n)) {
    cuda::mbar_arrive_expect(&full[i], kStageBytes);
    load_w(i, at);
  }
  cuda::pdl_wait();  // xq is the quantize kernel's output
  at = UnitCursor(u0, kb_n, tt_n);
  for (int i = 0; i < first; i++, at.next(kb_n, tt_n)) load_x(i, at);
  for (int i = first; i < n; i++, at.next(kb_n, tt_n)) {
    const int s = i % stages, use = i / stages;
    cuda::mbar_wait(&empty[s], uint32_t((use - 1) & 1));
    cuda::mbar_arrive_expect(&full[s], kStageBytes);
    load_w(s, at);
    load_x(s, at);
  }
}

// ---------------------------------------------------------------- the kernel

// One CTA: the run [begin(c), begin(c + 1)) of p.work.
template <int BN>
__global__ void __launch_bounds__(kThreads, 1)
    fp8_gemm_kernel(const __grid_constant__ CUtensorMap map_w,
                    const __grid_constant__ CUtensorMap map_x, const GemmParams p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kFp8WgmmaMaxStages], empty[kFp8WgmmaMaxStages];
  __shared__ int flags[2];  // per consumer warpgroup: whether it finishes a cut tile
  cuda::pdl_launch_next();

  const int c = int(blockIdx.x);
  const int u0 = p.work.begin(c), u1 = p.work.begin(c + 1);
  constexpr uint32_t kStageBytes = Ring<BN>::kStageBytes;
  const uint32_t raw = cuda::mbar_smem_addr(smem_raw);
  const uint32_t ring_base = (raw + 1023u) & ~1023u;  // stages start on swizzle atoms
  const int wg = int(threadIdx.x) / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; s++) {
      cuda::mbar_init(&full[s], 1);  // the producer's arrive.expect_tx
      cuda::mbar_init(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // for the async proxy
  }
  __syncthreads();

  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) produce<BN>(&map_w, &map_x, full, empty, ring_base, p, u0, u1);
    cuda::pdl_wait();  // every thread waits before it leaves (cuda_pdl.cuh)
    return;
  }
  sm90::setmaxnreg_inc<kConsumerRegs>();
  cuda::pdl_wait();
  const int cw = wg - 1, wtid = int(threadIdx.x) - 128 * wg;
  const Ring<BN> ring{cuda::mbar_smem_addr(full),
                      cuda::mbar_smem_addr(empty),
                      ring_base,
                      uint32_t(cw * 64 * kBlockK),
                      p.stages,
                      cw,
                      wtid & 31};
  float* stage =
      reinterpret_cast<float*>(smem_raw + (ring_base - raw) + size_t(p.stages) * kStageBytes) +
      cw * kStageRows * kStagePitch;
  const int kb_n = p.work.k_blocks;
  RingPos pos;
  float acc[BN / 8][4];
  for (int u = u0; u < u1;) {  // segments: the run's k-blocks of one tile each
    const int tile = u / kb_n, tile_end = (tile + 1) * kb_n;
    const int seg_end = tile_end < u1 ? tile_end : u1;
    if (p.fast_accum)
      mma_fast<BN>(acc, ring, pos, seg_end - u);
    else
      mma<BN>(acc, ring, pos, seg_end - u);
    const bool whole = u == tile * kb_n && seg_end == tile_end;
    if (whole || fix_up<BN>(acc, p, cw, wtid, c, tile, &flags[cw])) {
      const int ct = tile / p.token_tiles, tt = tile - ct * p.token_tiles;
      store_out<BN>(acc, stage, p.e, cw, wtid, ct * kFp8WgmmaChannelTile, tt * BN);
    }
    u = seg_end;
  }
}

// ---------------------------------------------------------------- launch

template <int BN>
void launch_gemm(const Fp8WgmmaPlan& plan, const CUtensorMap& map_w, const CUtensorMap& map_x,
                 const GemmParams& p, cudaStream_t stream) {
  auto kernel = fp8_gemm_kernel<BN>;
  static std::atomic<uint64_t> smem_ready;
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), plan.smem_bytes, smem_ready,
                           "linear fp8 (wgmma)");
  cuda::launch_pdl("fp8_gemm_kernel", kernel, dim3(unsigned(plan.ctas)), dim3(kThreads),
                   size_t(plan.smem_bytes), stream, map_w, map_x, p);
}

// The kernels built: one per token tile of the plan's list (cuda_gemm_fp8.h).
using TokenTiles = std::integer_sequence<int, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256>;
template <int... BNs>
constexpr bool same_tiles(std::integer_sequence<int, BNs...>) {
  constexpr int built[] = {BNs...};
  if (sizeof(built) != sizeof(kFp8WgmmaTokenTiles)) return false;
  for (size_t i = 0; i < sizeof(built) / sizeof(int); i++)
    if (built[i] != kFp8WgmmaTokenTiles[i]) return false;
  return true;
}
static_assert(same_tiles(TokenTiles{}), "a kernel for every token tile the plan may pick");

using LaunchGemm = void (*)(const Fp8WgmmaPlan&, const CUtensorMap&, const CUtensorMap&,
                            const GemmParams&, cudaStream_t);
template <int... BNs>
LaunchGemm gemm_launcher(int token_tile, std::integer_sequence<int, BNs...>) {
  LaunchGemm launch = nullptr;
  ((token_tile == BNs ? (launch = &launch_gemm<BNs>) : nullptr), ...);
  return launch;
}

}  // namespace

int* CudaBackend::fp8_gemm_counters() {
  return zeroed_counters(fp8_gemm_counters_, kCounterCapacity, "linear fp8 (wgmma arrival counters)");
}

void launch_fp8_wgmma(CudaBackend& be, const Fp8WgmmaArgs& a) {
  const int64_t T = a.xq->rows(), K = a.xq->cols(), N = a.w->dim(0);
  const cudaDeviceProp& props = be.props();
  const Fp8WgmmaPlan plan = plan_fp8_wgmma(T, N, K, props.multiProcessorCount,
                                           int(props.sharedMemPerBlockOptin), fp8_wgmma_splits());
  cuda_require(plan.token_tile > 0 && plan.stages >= 2,
               "linear fp8 (wgmma): no plan for this shape (fp8_wgmma_fits was not checked?)");
  const LaunchGemm launch = gemm_launcher(plan.token_tile, TokenTiles{});
  cuda_require(launch != nullptr, "linear fp8 (wgmma): no kernel for the plan's token tile");
  const Fp8WgmmaWork work = plan.work();
  cuda_require(plan.tiles() * plan.k_blocks < (int64_t(1) << 31) && work.ctas >= 1 &&
                   work.ctas <= kFp8WgmmaMaxCtas && work.ctas <= work.units,
               "linear fp8 (wgmma): too much work for one launch (Fp8WgmmaWork's integers)");
  const CUtensorMap map_w = cuda::byte_matrix_tensor_map(a.w->data, N, K, kFp8WgmmaChannelTile);
  const CUtensorMap map_x = cuda::byte_matrix_tensor_map(a.xq->data, T, K, plan.token_tile);
  GemmParams p{};
  p.e.out = a.out->data;
  p.e.x_scales = a.x_scales->ptr<float>();
  p.e.ws = cuda::WeightScales{
      a.w_scales, a.per_channel ? ScaleGranularity::PerChannel : ScaleGranularity::PerTensor};
  p.e.bias = a.bias && a.bias->defined() ? a.bias->ptr<bf16>() : nullptr;
  p.e.T = int(T);
  p.e.N = int(N);
  p.e.out_f32 = a.out->dtype == DType::F32;
  p.e.vec_out = N % 4 == 0 && cuda::aligned16(a.out->data);
  p.work = work;
  p.token_tiles = plan.token_tiles;
  p.stages = plan.stages;
  p.fast_accum = a.fast_accum ? 1 : 0;
  Tensor partials;  // freed at once: the allocator reuses it only for work queued later
  if (work.cuts_tiles()) {
    cuda_require(plan.ctas <= kFp8WgmmaMaxCutCtas,
                 "linear fp8 (wgmma): more CTAs than arrival counters for cut tiles");
    partials = be.alloc(DType::F32, {2 * int64_t(plan.ctas), 2, 64 * int64_t(plan.token_tile)});
    p.partials = partials.ptr<float>();
    p.counters = be.fp8_gemm_counters();
  }
  launch(plan, map_w, map_x, p, be.stream());
}

}  // namespace tandem
