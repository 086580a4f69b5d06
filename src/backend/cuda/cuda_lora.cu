// LoRA on CUDA (Backend::lora_add): every adapter of the step in two launches per
// projection, over the step's adapter tokens grouped by slot (LoraRows::order). Each
// adapter's rows are contiguous there, so the tokens of a block mostly share one adapter
// and read the same rows of A and B, which come from L1 after the first (punica's
// segmented idea, without a launch per adapter):
//   shrink: p[z][i] = A[s] · x[t] over the z-th slice of K,  t = order[i], s = order_slots[i]
//   expand: out[t] += B[s] · Σ_z p[z][i]      (only shard j's columns of R for rows of shard j)
// Tokens of slot 0 are not in `order` and cost nothing but blocks that return at once. The
// grids depend only on T, R, K and N, never on how many tokens have adapters (num_active
// is read on the device), so a decode graph recorded once replays for any mix of adapters,
// and the banks are read through their fixed addresses (an adapter installed later into a
// slot is what the next replay reads). bf16 storage, f32 arithmetic; v stays f32 between
// the two products, as on the CPU. A token's sums never depend on the tokens beside it:
// the slices of K and the order of every sum are fixed by the shapes alone.
//
// Two pairs of kernels share that plan: the tensor-core ones (cuda_lora_mma.cu) for the
// shapes of real projections (K a multiple of 32, N and the shard ends of 16, ranks of 4)
// when the step carries its tiles (LoraRows::tiles), and the CUDA-core ones below for
// every other shape. Either shrink feeds either expand
// through p [parts, T, R] (cuda_lora.h).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_lora.h"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kTokensPerBlock = 4;   // sorted adapter tokens per block, both kernels
constexpr int kRanksPerBlock = 8;    // shrink: one warp per rank
constexpr int kSliceK = 256;         // shrink: K per block, one 8-element chunk per lane
constexpr int kExpandThreads = 256;  // output columns per expand block, one per thread
constexpr int kMaxRank = 1024;       // the expand block's v tile [kTokensPerBlock, R] f32
constexpr int kMaxShards = cuda::kLoraMaxShards;

// These kernels move little data per token (a rank-16 adapter is ~1% of its projection's
// weights), so what bounds them is how many loads are in flight and the chain of dependent
// loads before the first useful one, not bandwidth: a thread issues all of its tokens' loads
// (unrolled, without a branch between them) before it uses one, and the grids split K and N
// finely (the constants above won a sweep of tokens per block 2–8, K slices 256–1024 and
// 128–256 expand threads on the H200, bench/RESULTS.md).

using Shards = cuda::LoraShards;

// The block's sorted tokens and their slots, in registers (rows > 0 of them are the step's).
// Entries past `rows` repeat the last one, so the unrolled loops load for every entry
// without a branch and only the stores look at `rows`.
struct BlockTokens {
  int token[kTokensPerBlock], slot[kTokensPerBlock];
};

__device__ __forceinline__ BlockTokens block_tokens(const int32_t* order,
                                                    const int32_t* order_slots, int begin,
                                                    int rows) {
  BlockTokens b;
#pragma unroll
  for (int i = 0; i < kTokensPerBlock; i++) {
    const int e = begin + min(i, rows - 1);
    b.token[i] = order[e];
    b.slot[i] = order_slots[e];
  }
  return b;
}

// grid (⌈T / kTokensPerBlock⌉, ⌈R / kRanksPerBlock⌉, ⌈K / kSliceK⌉). Warp w of block
// (bx, by, z) computes rank by·kRanksPerBlock + w over slice z of K for each of the block's
// sorted tokens: one P-element chunk of A and x per lane and step, one warp sum per token.
// x rows are read by all the block's warps and A rows by all tokens of a slot: L1 serves the
// repeats. p [parts, T, R].
template <int P, bool kVec>
__global__ void lora_shrink_kernel(float* __restrict__ p, const bf16* __restrict__ x,
                                   const bf16* __restrict__ a, const int32_t* __restrict__ order,
                                   const int32_t* __restrict__ order_slots,
                                   const int32_t* __restrict__ num_active, int R, int64_t K,
                                   int T) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int begin = int(blockIdx.x) * kTokensPerBlock;
  const int rows = min(kTokensPerBlock, *num_active - begin);
  const int r = int(blockIdx.y) * kRanksPerBlock + int(threadIdx.x >> 5);
  if (rows <= 0 || r >= R) return;  // whole warps leave; no barrier follows
  const int lane = int(threadIdx.x & 31);
  const BlockTokens bt = block_tokens(order, order_slots, begin, rows);
  const int64_t k0 = int64_t(blockIdx.z) * kSliceK;
  float acc[kTokensPerBlock];
#pragma unroll
  for (int i = 0; i < kTokensPerBlock; i++) acc[i] = 0.f;
#pragma unroll
  for (int step = 0; step < kSliceK / (32 * P); step++) {
    const int64_t k = k0 + int64_t(step * 32 + lane) * P;
    // Past K (the last slice): read chunk 0 and drop it. On the vector path K is a
    // multiple of P, so a chunk is all in or all out.
    const bool in = k < K;
    const int64_t kk = in ? k : 0;
#pragma unroll
    for (int i = 0; i < kTokensPerBlock; i++) {
      float av[P], xv[P];
      cuda::load_n<P, kVec>(a + (int64_t(bt.slot[i]) * R + r) * K + kk, av);
      cuda::load_n<P, kVec>(x + int64_t(bt.token[i]) * K + kk, xv);
      float dot = 0.f;
#pragma unroll
      for (int j = 0; j < P; j++) dot += av[j] * xv[j];
      acc[i] += in ? dot : 0.f;
    }
  }
#pragma unroll
  for (int i = 0; i < kTokensPerBlock; i++) {
    const float sum = cuda::warp_sum(acc[i]);
    if (lane == 0 && i < rows) p[(int64_t(blockIdx.z) * T + begin + i) * R + r] = sum;
  }
}

// grid (⌈N / kExpandThreads⌉, ⌈T / kTokensPerBlock⌉), dynamic shared memory
// kTokensPerBlock·R floats. The block first adds the shrink's slices of its sorted tokens'
// v (in slice order); thread n then adds B[s][n] · v[i] over its shard's columns to
// out[t, n] for each of them; each (t, n) has one writer, so no atomics.
template <int P, bool kVec>
__global__ void lora_expand_kernel(bf16* __restrict__ out, const float* __restrict__ p,
                                   int parts, const bf16* __restrict__ b,
                                   const int32_t* __restrict__ order,
                                   const int32_t* __restrict__ order_slots,
                                   const int32_t* __restrict__ num_active, int R, int64_t N,
                                   int T, Shards shards) {
  extern __shared__ float vs[];  // [rows of this block, R]
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int begin = int(blockIdx.y) * kTokensPerBlock;
  const int rows = min(kTokensPerBlock, *num_active - begin);
  if (rows <= 0) return;  // the whole block leaves together, before the barrier
  for (int e = int(threadIdx.x); e < rows * R; e += int(blockDim.x)) {
    float sum = 0.f;
#pragma unroll 8
    for (int z = 0; z < parts; z++) sum += p[(int64_t(z) * T + begin) * R + e];
    vs[e] = sum;
  }
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nc = n < N ? n : N - 1;  // columns past N load column N-1 and store nothing
  const BlockTokens bt = block_tokens(order, order_slots, begin, rows);
  int shard = 0;
  while (shard + 1 < shards.count && nc >= shards.ends[shard]) shard++;
  const int r0 = shard * shards.rank;
  float y[kTokensPerBlock];
#pragma unroll
  for (int i = 0; i < kTokensPerBlock; i++) y[i] = cuda::to_f32(out[int64_t(bt.token[i]) * N + nc]);
  __syncthreads();
  if (n >= N) return;
  float acc[kTokensPerBlock];
#pragma unroll
  for (int i = 0; i < kTokensPerBlock; i++) acc[i] = 0.f;
#pragma unroll 2
  for (int j = 0; j < shards.rank; j += P) {
#pragma unroll
    for (int i = 0; i < kTokensPerBlock; i++) {
      float bv[P];
      cuda::load_n<P, kVec>(b + (int64_t(bt.slot[i]) * N + n) * R + r0 + j, bv);
      const float* vi = vs + min(i, rows - 1) * R + r0 + j;
#pragma unroll
      for (int q = 0; q < P; q++) acc[i] += bv[q] * vi[q];
    }
  }
#pragma unroll
  for (int i = 0; i < kTokensPerBlock; i++)
    if (i < rows) out[int64_t(bt.token[i]) * N + n] = __float2bfloat16_rn(y[i] + acc[i]);
}

void check_lora_args(const Tensor& out, const Tensor& x, const LinearLora& lora,
                     const LoraRows& rows) {
  cuda::check_tensor(out, DType::BF16, "lora_add", "out");
  cuda::check_tensor(x, DType::BF16, "lora_add", "x");
  cuda::check_tensor(lora.a, DType::BF16, "lora_add", "a");
  cuda::check_tensor(lora.b, DType::BF16, "lora_add", "b");
  cuda::check_tensor(rows.slots, DType::I32, "lora_add", "slots");
  cuda::check_tensor(rows.order, DType::I32, "lora_add", "order");
  cuda::check_tensor(rows.order_slots, DType::I32, "lora_add", "order_slots");
  cuda::check_tensor(rows.num_active, DType::I32, "lora_add", "num_active");
  if (rows.tiles.defined()) cuda::check_tensor(rows.tiles, DType::I32, "lora_add", "tiles");
  TANDEM_CUDA_REQUIRE(lora.a.ndim() == 3 && lora.b.ndim() == 3,
                      "lora_add: a " + lora.a.shape.str() + " and b " + lora.b.shape.str() +
                          " must be [S, R, K] and [S, N, R]");
  const int64_t S = lora.a.dim(0), R = lora.a.dim(1), K = lora.a.dim(2), N = lora.b.dim(1);
  TANDEM_CUDA_REQUIRE(
      lora.b.dim(0) == S && lora.b.dim(2) == R,
      "lora_add: b " + lora.b.shape.str() + " does not match a " + lora.a.shape.str());
  TANDEM_CUDA_REQUIRE(x.ndim() == 2 && out.ndim() == 2 && x.cols() == K && out.cols() == N &&
                          out.rows() == x.rows(),
                      "lora_add: x " + x.shape.str() + " and out " + out.shape.str() +
                          " must be [T, " + std::to_string(K) + "] and [T, " + std::to_string(N) +
                          "]");
  TANDEM_CUDA_REQUIRE(rows.slots.numel() >= x.rows() && rows.order.numel() >= x.rows() &&
                          rows.order_slots.numel() >= x.rows(),
                      "lora_add: the step's LoRA rows are shorter than its tokens");
  const auto& ends = lora.shard_ends;
  bool shards_ok = ends.empty() || (ends.size() <= size_t(kMaxShards) && R % int64_t(ends.size()) == 0 &&
                                    ends.back() == N);
  for (size_t j = 1; shards_ok && j < ends.size(); j++) shards_ok = ends[j - 1] < ends[j];
  TANDEM_CUDA_REQUIRE(shards_ok, "lora_add: shard_ends must rise to N = " + std::to_string(N) +
                                     ", at most " + std::to_string(kMaxShards) +
                                     " shards dividing the rank " + std::to_string(R));
  TANDEM_CUDA_REQUIRE(R >= 1 && R <= kMaxRank, "lora_add: bank rank " + std::to_string(R) +
                                                   " outside [1, " + std::to_string(kMaxRank) +
                                                   "]");
}

}  // namespace

void CudaBackend::lora_add(Tensor& out, const Tensor& x, const LinearLora& lora,
                           const LoraRows& rows) {
  check_lora_args(out, x, lora, rows);
  const int64_t T = x.rows(), K = x.cols(), N = out.cols();
  const int R = int(lora.a.dim(1));
  if (T == 0) return;
  Shards shards{{N}, 1, R};
  if (!lora.shard_ends.empty()) {
    shards.count = int(lora.shard_ends.size());
    shards.rank = R / shards.count;
    for (int j = 0; j < shards.count; j++) shards.ends[j] = lora.shard_ends[size_t(j)];
  }
  // Tiles of one adapter each: at most one per kLoraTile tokens plus one per adapter boundary.
  const int64_t max_tiles = std::min(T, cuda::ceil_div(T, kLoraTile) + lora.a.dim(0) - 1);
  const bool tiled = rows.tiles.defined() && rows.tiles.numel() >= 1 + kLoraTileInts * T;
  const cuda::LoraTokens tokens{rows.order.ptr<int32_t>(), rows.order_slots.ptr<int32_t>(),
                                rows.num_active.ptr<int32_t>(), int(T),
                                tiled ? rows.tiles.ptr<int32_t>() : nullptr, int(max_tiles)};
  const bool shrink_mma = tiled && cuda::lora_mma_shrink_fits(K, x.data, lora.a.data);
  const int parts = int(cuda::ceil_div(K, shrink_mma ? cuda::kLoraMmaSliceK : kSliceK));
  Tensor p = alloc(DType::F32, {parts, T, R});
  if (shrink_mma) {
    cuda::launch_lora_mma_shrink(stream(), p.ptr<float>(), x.ptr<bf16>(), lora.a.ptr<bf16>(),
                                 tokens, R, K);
  } else {
    const bool vec = K % 8 == 0 && cuda::aligned16(x.data) && cuda::aligned16(lora.a.data);
    auto* shrink = vec ? &lora_shrink_kernel<8, true> : &lora_shrink_kernel<1, false>;
    cuda::launch_pdl(
        "lora_shrink kernel", shrink,
        dim3(unsigned(cuda::ceil_div(T, kTokensPerBlock)), unsigned(cuda::ceil_div(R, kRanksPerBlock)),
             unsigned(parts)),
        dim3(32 * kRanksPerBlock), 0, stream(), p.ptr<float>(), x.ptr<bf16>(), lora.a.ptr<bf16>(),
        tokens.order, tokens.order_slots, tokens.num_active, R, K, int(T));
  }
  if (tiled && cuda::lora_mma_expand_fits(N, R, shards, lora.b.data)) {
    cuda::launch_lora_mma_expand(stream(), out.ptr<bf16>(), p.ptr<float>(), parts,
                                 lora.b.ptr<bf16>(), tokens, R, N, shards);
    return;
  }
  const bool vec = shards.rank % 8 == 0 && R % 8 == 0 && cuda::aligned16(lora.b.data);
  auto* expand = vec ? &lora_expand_kernel<8, true> : &lora_expand_kernel<1, false>;
  cuda::launch_pdl("lora_expand kernel", expand,
                   dim3(unsigned(cuda::ceil_div(N, kExpandThreads)),
                        unsigned(cuda::ceil_div(T, kTokensPerBlock))),
                   dim3(kExpandThreads), size_t(kTokensPerBlock) * size_t(R) * sizeof(float),
                   stream(), out.ptr<bf16>(), p.ptr<float>(), parts, lora.b.ptr<bf16>(),
                   tokens.order, tokens.order_slots, tokens.num_active, R, N, int(T), shards);
}

}  // namespace tandem
