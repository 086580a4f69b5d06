// The FP8 (e4m3) GEMM on Hopper for linears of 9 to 512 rows (cuda_gemm_fp8.h says what it
// computes and takes; the plan rule is cuda_gemm_fp8_plan.cpp): D = W·xqᵀ on wgmma
// m64nNk32 e4m3 x e4m3 -> f32, the weights as the M side (64 output channels per
// consumer warpgroup), the tokens as the N side (the plan's token tile, up to 256).
//
// A CTA is three warpgroups and takes a run of (tile, k-block) units (Fp8WgmmaWork): one
// slice of one tile (Split), or an equal share of all of them, across tile boundaries
// (Stream):
//   - warpgroup 0, the producer: one thread walks the run and issues TMA boxes of 128
//     K-columns (bytes) of the tile's weight rows (128) and token rows into a ring of
//     stages in wgmma's 128-byte-swizzled layout (cuda_sm90.cuh), each stage completing
//     on its `full` mbarrier by transaction bytes (a box's bytes past the matrix are zeros
//     and count too, so N, T and K need not be multiples of the tile); it refills a stage
//     once the eight consumer warps have released it (`empty`); its other threads leave;
//   - warpgroups 1 and 2, the consumers: each takes 64 weight rows of every stage and
//     runs one of the main loops of cuda_gemm_fp8_consume.cuh over each segment of the
//     run (the k-blocks of one tile), then finishes the segment while the producer
//     already fills the ring with the next one's stages.
//
// Finishing a segment (each consumer warpgroup on its own 64 channels;
// cuda_gemm_fp8_epilogue.cuh):
//   - a whole tile: out = acc · s_x · s_w (+ bias), staged through the warpgroup's own
//     shared rows ([token][64 channels] f32, 68 floats apart: conflict-free fragment
//     stores) in chunks of 32 tokens, written as whole rows of 64 channels, bf16 or f32;
//   - a part of a cut tile (parts in CTA order; part 0 ends the first CTA's run, the others
//     start the following runs, so part 0 usually comes last): part 0 checks the tile's
//     arrival counter and, if every other part has arrived, adds their f32 partial sums
//     (fragment order in a workspace slot per CTA, read through L2) to its own in part
//     order and writes the output. Otherwise, and for the other parts, the part writes its
//     sums to its slot and counts itself in; the last to arrive adds all of them in part
//     order and writes the output. The sum is the same bits whoever finishes (no float
//     atomics, a fixed order), and the finisher sets the counter back to 0, so the
//     counters (the backend's zeroed buffer, two per CTA) are zero between launches.
//     Ordering as in the decode attention's split merge (cuda_attention_decode.cuh):
//     stores, named barrier, one thread's acq_rel atomic; the finisher's acquire, barrier,
//     ld.cg reads.
//
// Clusters of two (the multicast variant): the work's tiles are pairs of neighbouring
// channel tiles and a run belongs to a cluster; each CTA computes its own tile of each
// pair but loads only half of the shared token tile, by TMA multicast into both CTAs'
// stages, so each pulls half the token bytes from L2 (see produce for the barriers).
//
// Launched with programmatic dependent launch (cuda_pdl.cuh): the producer issues the
// first stages' weight boxes before it waits for the kernel before (weights are never
// written by a step), and x's boxes after; the consumers wait before reading anything.
#include <algorithm>
#include <atomic>
#include <climits>
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
// Clusters (kCluster = 2): the run's tiles are pairs of channel tiles, this CTA's the
// rank-th of each; it loads its own weight rows and the rank-th half of the token rows,
// multicast into both CTAs (each full barrier expects the whole stage: its own box and
// both halves), refills a stage once both CTAs' consumers have released it (16 arrivals),
// and before it leaves waits for every stage's last release, so that the peer's remote
// arrivals on this CTA's barriers have all landed.
template <int BN, int kCluster>
__device__ __forceinline__ void produce(const CUtensorMap* map_w, const CUtensorMap* map_x,
                                        uint64_t* full, uint64_t* empty, uint32_t base,
                                        const GemmParams& p, int u0, int u1, int rank) {
  constexpr uint32_t kStageBytes = Ring<BN>::kStageBytes;
  constexpr int kXRows = BN / kCluster;  // token rows this CTA loads per stage
  sm90::prefetch_tensor_map(map_w);
  sm90::prefetch_tensor_map(map_x);
  const int kb_n = p.work.k_blocks, tt_n = p.token_tiles, stages = p.stages;
  const int n = u1 - u0, first = n < stages ? n : stages;
  auto stage = [&](int s) { return base + uint32_t(s) * kStageBytes; };
  auto bar = [&](int s) { return cuda::mbar_smem_addr(&full[s]); };
  // A pair's second tile may lie past N (an odd tile count): its weights are not loaded
  // (the stage expects fewer bytes; the wgmmas read stale rows), its products never stored.
  auto expect_for = [&](const UnitCursor& at) {
    return at.ct * kCluster + rank < p.channel_tiles ? kStageBytes
                                                     : kStageBytes - uint32_t(kATileBytes);
  };
  auto load_w = [&](int s, const UnitCursor& at) {
    const int ct = at.ct * kCluster + rank;
    if (ct < p.channel_tiles)
      sm90::tma_load_2d(stage(s), map_w, at.kb * kBlockK, ct * kFp8WgmmaChannelTile, bar(s));
  };
  auto load_x = [&](int s, const UnitCursor& at) {
    const uint32_t dst = stage(s) + kATileBytes + uint32_t(rank * kXRows * kBlockK);
    const int row = at.tt * BN + rank * kXRows;
    if constexpr (kCluster > 1)
      sm90::tma_load_2d_multicast(dst, map_x, at.kb * kBlockK, row, bar(s),
                                  uint16_t((1 << kCluster) - 1));
    else
      sm90::tma_load_2d(dst, map_x, at.kb * kBlockK, row, bar(s));
  };
  // The first round's weights before waiting for the kernel before: a step never writes them.
  UnitCursor at(u0, kb_n, tt_n);
  for (int i = 0; i < first; i++, at.next(kb_n, tt_n)) {
    cuda::mbar_arrive_expect(&full[i], expect_for(at));
    load_w(i, at);
  }
  cuda::pdl_wait();  // xq is the quantize kernel's output
  at = UnitCursor(u0, kb_n, tt_n);
  for (int i = 0; i < first; i++, at.next(kb_n, tt_n)) load_x(i, at);
  for (int i = first; i < n; i++, at.next(kb_n, tt_n)) {
    const int s = i % stages, use = i / stages;
    cuda::mbar_wait(&empty[s], uint32_t((use - 1) & 1));
    cuda::mbar_arrive_expect(&full[s], expect_for(at));
    load_w(s, at);
    load_x(s, at);
  }
  if constexpr (kCluster > 1)
    for (int i = n; i < n + stages; i++)  // each used stage's last release
      if (i >= stages) cuda::mbar_wait(&empty[i % stages], uint32_t((i / stages - 1) & 1));
}

// ---------------------------------------------------------------- the kernel

// One CTA: the run [begin(c), begin(c + 1)) of p.work (c: the CTA, or its cluster). C: the
// consumers' main loop; kCluster: CTAs per cluster (2: TMA multicast of the token tile).
template <int BN, Fp8WgmmaConsumer C, int kCluster>
__global__ void __launch_bounds__(kThreads, 1)
    fp8_gemm_kernel(const __grid_constant__ CUtensorMap map_w,
                    const __grid_constant__ CUtensorMap map_x, const GemmParams p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kFp8WgmmaMaxStages], empty[kFp8WgmmaMaxStages];
  __shared__ int flags[2];  // per consumer warpgroup: whether it finishes a cut tile
  cuda::pdl_launch_next();

  const int rank = kCluster > 1 ? int(sm90::cluster_cta_rank()) : 0;
  const int c = int(blockIdx.x) / kCluster;
  const int u0 = p.work.begin(c), u1 = p.work.begin(c + 1);
  constexpr uint32_t kStageBytes = Ring<BN>::kStageBytes;
  const uint32_t raw = cuda::mbar_smem_addr(smem_raw);
  const uint32_t ring_base = (raw + 1023u) & ~1023u;  // stages start on swizzle atoms
  const int wg = int(threadIdx.x) / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; s++) {
      cuda::mbar_init(&full[s], 1);                           // the producer's arrive.expect_tx
      cuda::mbar_init(&empty[s], kConsumerWarps * kCluster);  // both CTAs' consumers
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // for the async proxy
  }
  if constexpr (kCluster > 1)
    sm90::cluster_sync();  // the peer's barriers are ready before its first box or arrival
  else
    __syncthreads();

  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0)
      produce<BN, kCluster>(&map_w, &map_x, full, empty, ring_base, p, u0, u1, rank);
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
                      wtid & 31,
                      kCluster > 1 ? sm90::map_to_cta(cuda::mbar_smem_addr(empty), rank ^ 1) : 0u};
  float* stage =
      reinterpret_cast<float*>(smem_raw + (ring_base - raw) + size_t(p.stages) * kStageBytes) +
      cw * kStageRows * kStagePitch;
  if constexpr (C == Fp8WgmmaConsumer::PingPong) {
    if (cw == 1) sm90::named_bar_arrive(kBarTurn0, 256);  // warpgroup 0 issues first
  }
  const int kb_n = p.work.k_blocks;
  RingPos pos;
  float acc[BN / 8][4];
  for (int u = u0; u < u1;) {  // segments: the run's k-blocks of one tile each
    const int tile = u / kb_n, tile_end = (tile + 1) * kb_n;
    const int seg_end = tile_end < u1 ? tile_end : u1;
    mma<BN, C>(acc, ring, pos, seg_end - u, seg_end == u1);
    const bool whole = u == tile * kb_n && seg_end == tile_end;
    if (whole || fix_up<BN, kCluster>(acc, p, cw, wtid, c, rank, tile, &flags[cw])) {
      const int ct = tile / p.token_tiles, tt = tile - ct * p.token_tiles;
      store_out<BN>(acc, stage, p.e, cw, wtid, (ct * kCluster + rank) * kFp8WgmmaChannelTile,
                    tt * BN);
    }
    u = seg_end;
  }
}

// ---------------------------------------------------------------- launch

// The kernel, its dynamic shared-memory limit raised (once per device).
template <int BN, Fp8WgmmaConsumer C, int kCluster>
const void* prepared(int smem_bytes) {
  static std::atomic<uint64_t> smem_ready;
  const void* kernel = reinterpret_cast<const void*>(&fp8_gemm_kernel<BN, C, kCluster>);
  cuda::allow_dynamic_smem(kernel, smem_bytes, smem_ready, "linear fp8 (wgmma)");
  return kernel;
}

template <int BN, Fp8WgmmaConsumer C, int kCluster>
void launch_gemm(const Fp8WgmmaPlan& plan, const CUtensorMap& map_w, const CUtensorMap& map_x,
                 const GemmParams& p, cudaStream_t stream) {
  auto kernel = fp8_gemm_kernel<BN, C, kCluster>;
  prepared<BN, C, kCluster>(plan.smem_bytes);
  if constexpr (kCluster == 1) {
    cuda::launch_pdl("fp8_gemm_kernel", kernel, dim3(unsigned(plan.ctas)), dim3(kThreads),
                     size_t(plan.smem_bytes), stream, map_w, map_x, p);
  } else {  // launch_pdl's launch with the cluster shape too
    cudaLaunchAttribute attrs[2] = {};
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = kCluster;
    attrs[0].val.clusterDim.y = 1;
    attrs[0].val.clusterDim.z = 1;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(plan.ctas));
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = size_t(plan.smem_bytes);
    config.stream = stream;
    config.attrs = attrs;
    config.numAttrs = cuda::pdl_enabled() ? 2 : 1;
    cuda_check(cudaLaunchKernelEx(&config, kernel, map_w, map_x, p), "fp8_gemm_kernel (clusters)");
  }
}

// CTAs of this kernel in clusters of kCluster that the GPU keeps resident at once (a
// cluster needs its SMs in one GPC, so some SMs may stay idle), asked once.
template <int BN, Fp8WgmmaConsumer C, int kCluster>
int resident_ctas(int smem_bytes, int num_sms) {
  static std::atomic<int> cached{0};
  if (const int n = cached.load()) return n;
  const void* kernel = prepared<BN, C, kCluster>(smem_bytes);
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = kCluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(std::max(kCluster, num_sms / kCluster * kCluster)));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = size_t(smem_bytes);
  config.attrs = &attr;
  config.numAttrs = 1;
  int clusters = 0;
  cuda_check(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config),
             "linear fp8 (wgmma): cudaOccupancyMaxActiveClusters");
  const int n = std::max(1, clusters) * kCluster;
  cached.store(n);
  return n;
}

// The kernels built: one per token tile of the plan's list (cuda_gemm_fp8.h) and consumer
// loop; Dual's tiles over 128 tokens are Serial's (cuda_gemm_fp8_consume.cuh); clusters
// run the Serial loop.
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
constexpr bool clusters_built() {
  for (const Fp8WgmmaVariant& v : kFp8WgmmaVariants)
    if (v.cluster != 1 && (v.cluster != 2 || v.schedule != Fp8WgmmaSchedule::Stream ||
                           v.consumer != Fp8WgmmaConsumer::Serial))
      return false;
  return true;
}
static_assert(clusters_built(), "clusters: pairs, Stream, the Serial loop");

constexpr Fp8WgmmaConsumer built_consumer(int bn, Fp8WgmmaConsumer c) {
  return c == Fp8WgmmaConsumer::Dual && bn > 128 ? Fp8WgmmaConsumer::Serial : c;
}

struct GemmKernel {
  void (*launch)(const Fp8WgmmaPlan&, const CUtensorMap&, const CUtensorMap&, const GemmParams&,
                 cudaStream_t) = nullptr;
  int (*resident)(int smem_bytes, int num_sms) = nullptr;
};
template <Fp8WgmmaConsumer C, int kCluster, int... BNs>
GemmKernel gemm_kernel(int token_tile, std::integer_sequence<int, BNs...>) {
  GemmKernel k;
  ((token_tile == BNs ? (k = {&launch_gemm<BNs, built_consumer(BNs, C), kCluster>,
                              &resident_ctas<BNs, built_consumer(BNs, C), kCluster>},
                         true)
                      : false),
   ...);
  return k;
}

GemmKernel gemm_kernel(int token_tile, const Fp8WgmmaVariant& v) {
  if (v.cluster == 2) return gemm_kernel<Fp8WgmmaConsumer::Serial, 2>(token_tile, TokenTiles{});
  switch (v.consumer) {
    case Fp8WgmmaConsumer::Serial:
      return gemm_kernel<Fp8WgmmaConsumer::Serial, 1>(token_tile, TokenTiles{});
    case Fp8WgmmaConsumer::PingPong:
      return gemm_kernel<Fp8WgmmaConsumer::PingPong, 1>(token_tile, TokenTiles{});
    case Fp8WgmmaConsumer::Dual:
      return gemm_kernel<Fp8WgmmaConsumer::Dual, 1>(token_tile, TokenTiles{});
  }
  return {};
}

}  // namespace

// Created outside graph capture only, as split_counters (cuda_attention.cu): zeroing it
// inside a capture would become a graph node, and eager launches before the first replay
// would see garbage. Every decode graph runs its step eagerly first.
int* CudaBackend::fp8_gemm_counters() {
  if (fp8_gemm_counters_) return fp8_gemm_counters_.get();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream_, &capture), "linear fp8: cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone)
    cuda_fail(
        "linear fp8 (wgmma): the arrival counters must be created outside CUDA graph capture; "
        "run the captured step once eagerly first");
  const size_t bytes = size_t(kCounterCapacity) * sizeof(int);
  cuda_check(cudaSetDevice(device_), "linear fp8: cudaSetDevice");
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), "linear fp8: cudaMalloc (arrival counters)");
  std::shared_ptr<int> counters(static_cast<int*>(p), [](int* q) { cudaFree(q); });
  cuda_check(cudaMemsetAsync(p, 0, bytes, stream_), "linear fp8: cudaMemsetAsync");
  fp8_gemm_counters_ = std::move(counters);
  return fp8_gemm_counters_.get();
}

void launch_fp8_wgmma(CudaBackend& be, const Fp8WgmmaArgs& a) {
  const int64_t T = a.xq->rows(), K = a.xq->cols(), N = a.w->dim(0);
  const cudaDeviceProp& props = be.props();
  const int variant = fp8_wgmma_variant(), smem = int(props.sharedMemPerBlockOptin);
  Fp8WgmmaPlan plan =
      plan_fp8_wgmma(T, N, K, props.multiProcessorCount, smem, variant, fp8_wgmma_splits());
  cuda_require(plan.token_tile > 0 && plan.stages >= 2,
               "linear fp8 (wgmma): no plan for this shape (fp8_wgmma_fits was not checked?)");
  const GemmKernel kernel = gemm_kernel(plan.token_tile, kFp8WgmmaVariants[plan.variant]);
  cuda_require(kernel.launch != nullptr, "linear fp8 (wgmma): no kernel for the plan's token tile");
  if (plan.cluster > 1) {  // one wave of clusters: as many as fit at once
    const int resident = kernel.resident(plan.smem_bytes, props.multiProcessorCount);
    if (plan.ctas > resident)
      plan = plan_fp8_wgmma(T, N, K, resident, smem, variant, fp8_wgmma_splits());
  }
  const Fp8WgmmaWork work = plan.work();
  cuda_require(plan.tiles() * plan.k_blocks < (int64_t(1) << 31) && work.ctas >= 1 &&
                   work.ctas <= kFp8WgmmaMaxCtas && work.ctas <= work.units,
               "linear fp8 (wgmma): too much work for one launch (Fp8WgmmaWork's integers)");
  const CUtensorMap map_w = cuda::byte_matrix_tensor_map(a.w->data, N, K, kFp8WgmmaChannelTile);
  // A cluster's CTAs load a share of the token rows each (multicast to all of them).
  const CUtensorMap map_x =
      cuda::byte_matrix_tensor_map(a.xq->data, T, K, plan.token_tile / plan.cluster);
  GemmParams p{};
  p.e.out = a.out->data;
  p.e.x_scales = a.x_scales->ptr<float>();
  p.e.ws = cuda::Fp8WeightScales{a.w_scales, a.per_channel ? 1 : 0, 1, 1};
  p.e.bias = a.bias && a.bias->defined() ? a.bias->ptr<bf16>() : nullptr;
  p.e.T = int(T);
  p.e.N = int(N);
  p.e.out_f32 = a.out->dtype == DType::F32;
  p.e.vec_out = N % 4 == 0 && cuda::aligned16(a.out->data);
  p.work = work;
  p.channel_tiles = plan.channel_tiles;
  p.token_tiles = plan.token_tiles;
  p.stages = plan.stages;
  Tensor partials;  // freed at once: the allocator reuses it only for work queued later
  if (work.cuts_tiles()) {
    cuda_require(plan.ctas <= kFp8WgmmaMaxCutCtas,
                 "linear fp8 (wgmma): more CTAs than arrival counters for cut tiles");
    partials = be.alloc(DType::F32, {2 * int64_t(plan.ctas), 2, 64 * int64_t(plan.token_tile)});
    p.partials = partials.ptr<float>();
    p.counters = be.fp8_gemm_counters();
  }
  kernel.launch(plan, map_w, map_x, p, be.stream());
}

}  // namespace tandem
