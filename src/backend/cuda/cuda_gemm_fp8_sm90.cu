// The FP8 (e4m3) GEMM on Hopper for linears of 9 to 512 rows (cuda_gemm_fp8.h says what it
// computes and takes; the plan rule is cuda_gemm_fp8_plan.cpp): D = W·xqᵀ on wgmma
// m64nNk32 e4m3 x e4m3 -> f32, the weights as the M side (64 output channels per
// consumer warpgroup), the tokens as the N side (the plan's token tile, up to 256).
//
// A CTA is three warpgroups and owns 128 output channels x token_tile tokens and a slice
// of K (the plan's splits):
//   - warpgroup 0, the producer: one thread issues TMA boxes of 128 K-columns (bytes) of
//     the weight tile (128 rows) and of the token tile into a ring of stages in wgmma's
//     128-byte-swizzled layout (cuda_sm90.cuh), each stage completing on its `full`
//     mbarrier by transaction bytes (a box's bytes past the matrix are zeros and count
//     too, so N, T and K need not be multiples of the tile); its other threads leave;
//   - warpgroups 1 and 2, the consumers: each multiplies its 64 weight rows of a stage by
//     the stage's token tile (four k32 wgmmas into a fresh accumulator, added to the f32
//     total on the CUDA cores: see consume), and releases the stage (`empty`, all 256
//     consumer threads); one warpgroup's adds run under the other's wgmmas.
// Phases: k-block i of the slice uses stage i mod S for the n = i / S-th time; consumers
// wait for full[s] with parity n & 1, the producer (from the second round on) for
// empty[s] with parity (n - 1) & 1 before refilling it.
//
// Epilogue: both warpgroups meet at a named barrier (the ring is then free), stage their
// accumulators through shared memory as [token][64 channels] f32 rows (68 floats apart:
// conflict-free fragment stores), and write whole rows of 64 channels: unsplit, the
// output out[t, n] = acc · s_x[t] · s_w(n) (+ bias[n]) in bf16 or f32; split, the f32
// partial sums to a workspace [splits, T, N], which fp8_gemm_reduce_kernel adds in split
// order before applying the same epilogue (deterministic: a fixed order and no atomics).
//
// Launched with programmatic dependent launch (cuda_pdl.cuh): the producer issues the
// first stages' weight boxes before it waits for the kernel before (weights are never
// written by a step), and x's boxes after; the consumers wait before reading anything.
#include <atomic>
#include <climits>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_linear_fp8.cuh"
#include "backend/cuda/cuda_mbarrier.cuh"
#include "backend/cuda/cuda_pdl.cuh"
#include "backend/cuda/cuda_sm90.cuh"
#include "backend/cuda/cuda_tensor_map.h"
#include "backend/cuda/cuda_wgmma_e4m3.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "cuda_gemm_fp8_sm90.cu needs sm_90a (wgmma, setmaxnreg): see CMakeLists.txt"
#endif

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kThreads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int kConsumerThreads = 256;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "one CTA's registers");
constexpr int kBlockK = kFp8WgmmaBlockK;                     // bytes of K per stage
constexpr int kATileBytes = kFp8WgmmaChannelTile * kBlockK;  // 16 KB of weights per stage
constexpr int kStagePitch = 64 + 4;  // floats per staged token row (cuda_gemm_fp8_plan.cpp)
// Named barriers (0 is __syncthreads): both consumer warpgroups; then one per warpgroup.
constexpr int kBarConsumers = 1, kBarWarpgroup0 = 2;

// What the epilogue needs: the scales, the bias and where the result goes.
struct Epilogue {
  void* out;              // [T, N] bf16, or f32 when out_f32
  const float* x_scales;  // [T]
  cuda::Fp8WeightScales ws;
  const bf16* bias;  // [N] or null
  int T, N;
  bool out_f32;
  bool vec_out;  // N % 4 == 0 and out 16-byte aligned: 4 channels per store
};

struct GemmParams {
  Epilogue e;
  float* partials;  // [splits, T, N] f32 when splits > 1
  int num_k_blocks, splits, token_tiles, stages;
};

// out[t, n..n+3] = v · s_x[t] · s_w(n..) (+ bias), channels past N skipped.
__device__ __forceinline__ void finish4(const Epilogue& e, int t, int n, float (&v)[4]) {
  const float sx = e.x_scales[t];
  const int64_t at = int64_t(t) * e.N + n;
  if (e.vec_out && n + 3 < e.N) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      v[j] = v[j] * sx * e.ws.at(n + j, 0);
      if (e.bias) v[j] += cuda::to_f32(e.bias[n + j]);
    }
    if (e.out_f32) {
      *reinterpret_cast<float4*>(static_cast<float*>(e.out) + at) =
          make_float4(v[0], v[1], v[2], v[3]);
    } else {
      __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
      uint2 packed;
      packed.x = *reinterpret_cast<uint32_t*>(&lo);
      packed.y = *reinterpret_cast<uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(static_cast<bf16*>(e.out) + at) = packed;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; j++) {
    if (n + j >= e.N) break;
    float r = v[j] * sx * e.ws.at(n + j, 0);
    if (e.bias) r += cuda::to_f32(e.bias[n + j]);
    if (e.out_f32)
      static_cast<float*>(e.out)[at + j] = r;
    else
      static_cast<bf16*>(e.out)[at + j] = __float2bfloat16_rn(r);
  }
}

// ---------------------------------------------------------------- producer

// The thread that issues every TMA box of the CTA's K slice: k-blocks [kb0, kb0 + nk) of
// weight rows from n0 and tokens from t0. stage_bytes: the weight box, then the token box.
__device__ __forceinline__ void produce(const CUtensorMap* map_w, const CUtensorMap* map_x,
                                        uint64_t* full, uint64_t* empty, uint32_t ring,
                                        uint32_t stage_bytes, int stages, int kb0, int nk, int n0,
                                        int t0) {
  sm90::prefetch_tensor_map(map_w);
  sm90::prefetch_tensor_map(map_x);
  const int first = nk < stages ? nk : stages;
  // The first round's weights before waiting for the kernel before: a step never writes them.
  for (int i = 0; i < first; i++) {
    const uint32_t stage = ring + uint32_t(i) * stage_bytes;
    cuda::mbar_arrive_expect(&full[i], stage_bytes);
    sm90::tma_load_2d(stage, map_w, (kb0 + i) * kBlockK, n0, cuda::mbar_smem_addr(&full[i]));
  }
  cuda::pdl_wait();  // xq is the quantize kernel's output
  for (int i = 0; i < first; i++) {
    const uint32_t stage = ring + uint32_t(i) * stage_bytes;
    sm90::tma_load_2d(stage + kATileBytes, map_x, (kb0 + i) * kBlockK, t0,
                      cuda::mbar_smem_addr(&full[i]));
  }
  for (int i = first; i < nk; i++) {
    const int s = i % stages, n = i / stages;
    cuda::mbar_wait(&empty[s], uint32_t((n - 1) & 1));
    const uint32_t stage = ring + uint32_t(s) * stage_bytes, bar = cuda::mbar_smem_addr(&full[s]);
    cuda::mbar_arrive_expect(&full[s], stage_bytes);
    sm90::tma_load_2d(stage, map_w, (kb0 + i) * kBlockK, n0, bar);
    sm90::tma_load_2d(stage + kATileBytes, map_x, (kb0 + i) * kBlockK, t0, bar);
  }
}

// ---------------------------------------------------------------- consumers

// acc = Σ over the slice's nk k-blocks of the warpgroup's 64 weight rows (cw = 0 or 1)
// times the token tile. Each k-block's four k32 wgmmas sum into a fresh accumulator that is
// then added to acc in f32 on the CUDA cores ("promotion", as cuBLASLt and CUTLASS do by
// default): Hopper's e4m3 wgmma keeps only ~14 significant bits in its own running sum,
// so chaining all of K in it would cost ~1e-3 of relative error at K = 4096. Tiles over
// 128 tokens run as two halves one after the other, so the fresh accumulator is half as
// wide (acc + part: 192 floats at 256 tokens).
template <int BN>
__device__ __forceinline__ void consume(float (&acc)[BN / 8][4], uint64_t* full, uint64_t* empty,
                                        uint32_t ring, uint32_t stage_bytes, int stages, int nk,
                                        int cw) {
  constexpr int kHalves = BN > 128 ? 2 : 1, SN = BN / kHalves;
  static_assert(SN % 8 == 0, "a half is whole 8-token groups (1024-byte aligned in the stage)");
  float part[SN / 8][4];
#pragma unroll
  for (int i = 0; i < BN / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll
  for (int i = 0; i < SN / 8; i++) part[i][0] = part[i][1] = part[i][2] = part[i][3] = 0.f;
  const uint32_t rows = uint32_t(cw * 64 * 128);  // 64 rows = 8 swizzle atoms
  for (int i = 0; i < nk; i++) {
    const int s = i % stages;
    cuda::mbar_wait(&full[s], uint32_t((i / stages) & 1));
    const uint32_t a = ring + uint32_t(s) * stage_bytes + rows;
    const uint32_t b = ring + uint32_t(s) * stage_bytes + kATileBytes;
#pragma unroll
    for (int h = 0; h < kHalves; h++) {
      const uint32_t bh = b + uint32_t(h * SN * 128);
      sm90::fence_operands(part);
      sm90::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockK / 32; kk++)  // 32 bytes of K per wgmma
        sm90::wgmma_e4m3<SN>(part, sm90::sw128_desc(a + uint32_t(kk * 32), 16),
                             sm90::sw128_desc(bh + uint32_t(kk * 32), 16), kk > 0 ? 1 : 0);
      sm90::wgmma_commit();
      sm90::wgmma_wait<0>();
      sm90::fence_operands(part);
#pragma unroll
      for (int r = 0; r < SN / 8; r++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[h * (SN / 8) + r][e] += part[r][e];
    }
    cuda::mbar_arrive(&empty[s]);  // this warpgroup is done with the stage
  }
}

// The warpgroup's 64 channels x BN tokens through shared memory (stage: BN rows of
// kStagePitch floats), then out to `e` (unsplit) or to split `split`'s partial sums.
template <int BN>
__device__ __forceinline__ void store_tile(const float (&acc)[BN / 8][4], float* stage,
                                           const GemmParams& p, int cw, int n0, int t0, int split) {
  const int wtid = int(threadIdx.x) - 128 * (cw + 1), lane = wtid & 31, warp = wtid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int n = 16 * warp + g;  // the fragment's row: a channel of the warpgroup's 64
#pragma unroll
  for (int nt = 0; nt < BN / 8; nt++) {
    const int t = 8 * nt + 2 * q;  // the fragment's columns t, t + 1: tokens
    stage[t * kStagePitch + n] = acc[nt][0];
    stage[(t + 1) * kStagePitch + n] = acc[nt][1];
    stage[t * kStagePitch + n + 8] = acc[nt][2];
    stage[(t + 1) * kStagePitch + n + 8] = acc[nt][3];
  }
  sm90::named_bar_sync(kBarWarpgroup0 + cw, 128);
  // 16 threads a token row, 4 channels each; 8 rows per pass of the warpgroup.
  const int j = (wtid % 16) * 4, nc = n0 + cw * 64 + j;
  if (nc >= p.e.N) return;  // nothing of this thread's channels exists
  for (int r = wtid / 16; r < BN; r += 8) {
    const int t = t0 + r;
    if (t >= p.e.T) break;
    const float4 v4 = *reinterpret_cast<const float4*>(stage + r * kStagePitch + j);
    float v[4] = {v4.x, v4.y, v4.z, v4.w};
    if (p.splits == 1) {
      finish4(p.e, t, nc, v);
      continue;
    }
    float* dst = p.partials + (int64_t(split) * p.e.T + t) * p.e.N + nc;
    if (p.e.N % 4 == 0) {
      *reinterpret_cast<float4*>(dst) = v4;  // the workspace is 16-byte aligned
    } else {
#pragma unroll
      for (int k = 0; k < 4; k++)
        if (nc + k < p.e.N) dst[k] = v[k];
    }
  }
}

// One CTA: blockIdx.x = (channel tile, split, token tile), token tile fastest, so the CTAs
// sharing a weight tile run side by side (the later ones read it from L2).
template <int BN>
__global__ void __launch_bounds__(kThreads, 1)
    fp8_gemm_kernel(const __grid_constant__ CUtensorMap map_w,
                    const __grid_constant__ CUtensorMap map_x, const GemmParams p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kFp8WgmmaMaxStages], empty[kFp8WgmmaMaxStages];
  cuda::pdl_launch_next();

  const int b = int(blockIdx.x);
  const int tt = b % p.token_tiles, split = (b / p.token_tiles) % p.splits;
  const int ct = b / (p.token_tiles * p.splits);
  const int n0 = ct * kFp8WgmmaChannelTile, t0 = tt * BN;
  const int kb0 = int(int64_t(split) * p.num_k_blocks / p.splits);
  const int nk = int(int64_t(split + 1) * p.num_k_blocks / p.splits) - kb0;  // >= 1
  constexpr uint32_t kStageBytes = uint32_t(kATileBytes + BN * kBlockK);
  const uint32_t raw = cuda::mbar_smem_addr(smem_raw);
  const uint32_t ring = (raw + 1023u) & ~1023u;  // stages start on swizzle atoms

  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; s++) {
      cuda::mbar_init(&full[s], 1);  // the producer's arrive.expect_tx
      cuda::mbar_init(&empty[s], kConsumerThreads);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // for the async proxy
  }
  __syncthreads();

  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0)
      produce(&map_w, &map_x, full, empty, ring, kStageBytes, p.stages, kb0, nk, n0, t0);
    cuda::pdl_wait();  // every thread waits before it leaves (cuda_pdl.cuh)
    return;
  }
  sm90::setmaxnreg_inc<kConsumerRegs>();
  cuda::pdl_wait();
  const int cw = wg - 1;
  float acc[BN / 8][4];
  consume<BN>(acc, full, empty, ring, kStageBytes, p.stages, nk, cw);
  sm90::named_bar_sync(kBarConsumers, kConsumerThreads);  // no wgmma reads the ring any more
  float* stage = reinterpret_cast<float*>(smem_raw + (ring - raw)) + cw * BN * kStagePitch;
  store_tile<BN>(acc, stage, p, cw, n0, t0, split);
}

// out = Σ_s partials[s] (in split order) · s_x · s_w (+ bias): 4 channels per thread.
__global__ void fp8_gemm_reduce_kernel(const float* __restrict__ partials, int splits, Epilogue e) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int quads = (e.N + 3) / 4;
  const int64_t total = int64_t(e.T) * quads, plane = int64_t(e.T) * e.N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int t = int(i / quads), n = int(i % quads) * 4;
    const float* src = partials + int64_t(t) * e.N + n;
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    if (e.N % 4 == 0) {
      for (int s = 0; s < splits; s++) {
        const float4 p = *reinterpret_cast<const float4*>(src + s * plane);
        v[0] += p.x;
        v[1] += p.y;
        v[2] += p.z;
        v[3] += p.w;
      }
    } else {
      for (int s = 0; s < splits; s++)
#pragma unroll
        for (int j = 0; j < 4; j++)
          if (n + j < e.N) v[j] += src[s * plane + j];
    }
    finish4(e, t, n, v);
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
  cuda_require(plan.ctas() < INT_MAX, "linear fp8 (wgmma): too many CTAs");
  cuda::launch_pdl("fp8_gemm_kernel", kernel, dim3(unsigned(plan.ctas())), dim3(kThreads),
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

void launch_fp8_wgmma(CudaBackend& be, const Fp8WgmmaArgs& a) {
  const int64_t T = a.xq->rows(), K = a.xq->cols(), N = a.w->dim(0);
  const cudaDeviceProp& props = be.props();
  const Fp8WgmmaPlan plan = plan_fp8_wgmma(T, N, K, props.multiProcessorCount,
                                           int(props.sharedMemPerBlockOptin), fp8_wgmma_splits());
  cuda_require(plan.token_tile > 0 && plan.stages >= 2,
               "linear fp8 (wgmma): no plan for this shape (fp8_wgmma_fits was not checked?)");
  const CUtensorMap map_w = cuda::byte_matrix_tensor_map(a.w->data, N, K, kFp8WgmmaChannelTile);
  const CUtensorMap map_x = cuda::byte_matrix_tensor_map(a.xq->data, T, K, plan.token_tile);
  const bool out_f32 = a.out->dtype == DType::F32;
  GemmParams p{};
  p.e.out = a.out->data;
  p.e.x_scales = a.x_scales->ptr<float>();
  p.e.ws = cuda::Fp8WeightScales{a.w_scales, a.per_channel ? 1 : 0, 1, 1};
  p.e.bias = a.bias && a.bias->defined() ? a.bias->ptr<bf16>() : nullptr;
  p.e.T = int(T);
  p.e.N = int(N);
  p.e.out_f32 = out_f32;
  p.e.vec_out = N % 4 == 0 && cuda::aligned16(a.out->data);
  p.num_k_blocks = int(cuda::ceil_div(K, kBlockK));
  p.splits = plan.splits;
  p.token_tiles = plan.token_tiles;
  p.stages = plan.stages;
  Tensor partials;  // freed at once: the allocator reuses it only for work queued later
  if (plan.splits > 1) {
    partials = be.alloc(DType::F32, {plan.splits, T, N});
    p.partials = partials.ptr<float>();
  }
  const LaunchGemm launch = gemm_launcher(plan.token_tile, TokenTiles{});
  cuda_require(launch != nullptr, "linear fp8 (wgmma): no kernel for the plan's token tile");
  launch(plan, map_w, map_x, p, be.stream());
  if (plan.splits > 1) {
    const int64_t quads = T * cuda::ceil_div(N, 4);
    cuda::launch_pdl("fp8_gemm_reduce_kernel", &fp8_gemm_reduce_kernel,
                     dim3(cuda::grid_stride_blocks(quads, 256)), dim3(256), 0, be.stream(),
                     static_cast<const float*>(p.partials), plan.splits, p.e);
  }
}

}  // namespace tandem
