// Prefill attention (rows with >= 2 query tokens): flash-attention-2 on mma.sync tensor
// cores, reading K/V through the block table.
//
// GQA packing: the query rows of one (sequence row, kv head) are the pairs
// (token i, head-in-group r) in the order i·G + r, so one K/V tile feeds every query head
// that reads it. A CTA computes 64 such query rows (one 16-row slice per warp) against
// key tiles of 64, keeping O in registers; K/V tiles covering no query's visible range
// are never loaded (causal + sliding window skip) and tiles fully visible to every query
// of the CTA skip the per-element mask.
//
// CTA -> work without a host sync: grid.x is an upper bound on the number of query tiles
// (ceil(T·G/64) + B); each CTA finds its (row, tile) by a block-wide scan over
// seq_starts and exits when it has none. grid.y = kv head, grid.z = slice of the V/O
// columns (head dim 512 is computed as two 256-column halves, recomputing Q·Kᵀ).
//
// An e4m3 cache is widened to bf16 as its tiles are copied into shared memory (plain
// loads instead of cp.async; the math is the bf16 kernel's).
//
// launch_prefill hands the cases Hopper's kernel covers to it (cuda_attention_prefill_sm90.cu):
// the rule, choose_prefill_kernel, is at the end of this file and in words in
// cuda_attention_prefill.h.
#include <climits>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_attention_prefill.h"
#include "backend/cuda/cuda_attention_prefill_tiles.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

namespace tandem::attn {

namespace {

constexpr int kBlockM = 64;  // query rows per CTA (16 per warp)
constexpr int kBlockN = 64;  // keys per tile

// Q rows of the tile into shared memory (zeros for invalid rows and padded columns).
template <int DHQK, int QSTRIDE>
__device__ __forceinline__ void load_q_tile(uint32_t dst, const TileRows<kBlockM>& t,
                                            const AttnArgs& a) {
  constexpr int kChunksPerRow = DHQK / 8, kChunks = kBlockM * kChunksPerRow;
  static_assert(kChunks % kThreads == 0);
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; i++) {
    const int id = int(threadIdx.x) + i * kThreads;
    const int r = id / kChunksPerRow, c = id % kChunksPerRow;
    const bool ok = t.off[r] >= 0 && c * 8 < a.head_dim;
    const void* src = ok ? static_cast<const void*>(a.q + t.off[r] + c * 8) : a.q;
    cp_async_16(dst + uint32_t((r * QSTRIDE + c * 8) * 2), src, ok ? 16 : 0);
  }
}

// One CTA: 64 packed query rows of one sequence row and kv head against all the keys
// they see; V/O columns [blockIdx.z·DV, +DV).
template <int DHQK, int DV, typename KV>
__global__ void __launch_bounds__(kThreads) prefill_kernel(AttnArgs a) {
  constexpr int QS = DHQK + 8, KS = DHQK + 8, VS = DV + 8;  // +16 B: conflict-free ldmatrix
  constexpr bool kQInRegs = DHQK <= 128;
  constexpr int NV = DV / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);
  bf16* k_s = q_s + kBlockM * QS;
  bf16* v_s = k_s + kBlockN * KS;
  __shared__ TileRows<kBlockM> rows;

  const int tile = int(gridDim.x) - 1 - int(blockIdx.x);  // last (longest) tiles first
  const int kvh = blockIdx.y, col0 = blockIdx.z * DV;
  int row, row_tile;
  if (!find_tile<kBlockM, kThreads>(a, tile, row, row_tile)) return;
  setup_rows(rows, a, row, row_tile, kvh);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t* bt_row = a.block_table + int64_t(row) * a.max_blocks;
  const uint32_t q_base = smem_addr(q_s), k_base = smem_addr(k_s), v_base = smem_addr(v_s);
  const KV* k_cache = static_cast<const KV*>(a.k);
  const KV* v_cache = static_cast<const KV*>(a.v);
  const int kmin = rows.kmin, kmax = rows.kmax, hi_min = rows.hi_min, lo_max = rows.lo_max;
  load_q_tile<DHQK, QS>(q_base, rows, a);
  load_kv_tile<kBlockN, DHQK, KS>(k_base, k_cache, bt_row, a, kvh, kmin, kmax, 0);
  cp_async_commit();

  const int r0 = warp * 16 + (lane >> 2);
  const int lo[2] = {rows.lo[r0], rows.lo[r0 + 8]}, hi[2] = {rows.hi[r0], rows.hi[r0 + 8]};
  const bool warp_live = rows.off[warp * 16] >= 0;  // valid rows come first
  const uint32_t q_lane = q_base + uint32_t(warp * 16 * QS * 2) + a_lane_offset(lane, QS);
  const uint32_t k_lane = k_base + k_lane_offset(lane, KS);
  const uint32_t v_lane = v_base + v_lane_offset(lane, VS);
  uint32_t qf[kQInRegs ? DHQK / 16 : 1][4];
  float o[NV][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nv = 0; nv < NV; nv++) o[nv][0] = o[nv][1] = o[nv][2] = o[nv][3] = 0.f;

  const int num_tiles = (kmax - kmin) / kBlockN + 1;
  for (int it = 0; it < num_tiles; it++) {
    const int kt = kmin + it * kBlockN;
    cp_async_wait<0>();  // K tile `it` (and Q) landed
    __syncthreads();     // ... for every thread; every warp is done with V tile it-1
    load_kv_tile<kBlockN, DV, VS>(v_base, v_cache, bt_row, a, kvh, kt, kmax, col0);
    cp_async_commit();
    float s[kBlockN / 8][4];
    if (warp_live) {
      if constexpr (kQInRegs) {
        if (it == 0) load_q_frags<DHQK>(qf, q_lane);
      }
      warp_qk<DHQK, kBlockN, KS, kQInRegs>(s, qf, q_lane, k_lane);
      const bool masked = kt + kBlockN - 1 > hi_min || kt < lo_max;
      score_tile<kBlockN>(s, a, kt, lo, hi, masked, lane);
      online_softmax<kBlockN, NV>(s, o, m, l);
    }
    cp_async_wait<0>();  // V tile `it` landed
    __syncthreads();     // ... and every warp is done with K tile `it`
    if (it + 1 < num_tiles) {
      load_kv_tile<kBlockN, DHQK, KS>(k_base, k_cache, bt_row, a, kvh, kt + kBlockN, kmax, 0);
      cp_async_commit();
    }
    if (warp_live) warp_pv<kBlockN, NV, VS>(o, s, v_lane);
  }
  if (warp_live) store_rows<kBlockM, NV>(a, rows, r0, o, l, col0, lane);
}

template <int DHQK, int DV>
void launch(const AttnArgs& a, cudaStream_t stream) {
  constexpr int smem = (kBlockM * (DHQK + 8) + kBlockN * (DHQK + 8) + kBlockN * (DV + 8)) * 2;
  auto kernel = a.kv_f8 ? prefill_kernel<DHQK, DV, uint8_t> : prefill_kernel<DHQK, DV, bf16>;
  static std::atomic<uint64_t> smem_ready_bf16{0}, smem_ready_f8{0};
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem,
                           a.kv_f8 ? smem_ready_f8 : smem_ready_bf16, "attention prefill");
  const int64_t tiles = (int64_t(a.num_tokens) * a.group + kBlockM - 1) / kBlockM + a.num_rows;
  cuda_require(tiles < INT_MAX, "attention prefill: too many query tiles");
  const dim3 grid(unsigned(tiles), unsigned(a.num_kv_heads), unsigned(DHQK / DV));
  kernel<<<grid, kThreads, smem, stream>>>(a);
  TANDEM_CUDA_LAUNCHED("attention prefill kernel");
}

}  // namespace

int padded_head_dim(int head_dim) {
  for (int d : {32, 64, 96, 128, 256, 512})
    if (head_dim <= d) return d;
  return 0;
}

void launch_prefill(const AttnArgs& a, const cudaDeviceProp& props, bool sm90_on,
                    cudaStream_t stream) {
  if (cuda::choose_prefill_kernel(a.head_dim, a.kv_f8, props, sm90_on) == cuda::PrefillKernel::Sm90)
    return launch_prefill_sm90(a, stream);
  switch (padded_head_dim(a.head_dim)) {
    case 32:
      return launch<32, 32>(a, stream);
    case 64:
      return launch<64, 64>(a, stream);
    case 96:
      return launch<96, 96>(a, stream);
    case 128:
      return launch<128, 128>(a, stream);
    case 256:
      return launch<256, 256>(a, stream);
    case 512:
      return launch<512, 256>(a, stream);
    default:
      cuda_fail("attention prefill: head dim above 512");
  }
}

}  // namespace tandem::attn

namespace tandem::cuda {

// The producer rule (cuda_attention_prefill.h says it in words).
Sm90Loads choose_sm90_loads(bool kv_f8, int head_dim, int block_size, int64_t num_slots) {
  const bool pow2 = block_size > 0 && (block_size & (block_size - 1)) == 0;
  const bool fits = !kv_f8 && pow2 && block_size >= 8 && head_dim >= 64 && head_dim % 8 == 0 &&
                    num_slots < (int64_t(1) << 31);
  return fits ? Sm90Loads::Tma : Sm90Loads::CpAsync;
}

const char* sm90_loads_name(Sm90Loads l) {
  return l == Sm90Loads::Tma ? "tma" : "cp.async";
}

// The one rule (cuda_attention_prefill.h says it in words).
PrefillKernel choose_prefill_kernel(int head_dim, bool kv_f8, const cudaDeviceProp& props,
                                    bool sm90_on) {
  if (!sm90_on || props.major != 9) return PrefillKernel::Mma;
  const int smem = attn::prefill_sm90_smem_bytes(head_dim, kv_f8);  // 0: head dim not covered
  if (smem == 0 || size_t(smem) > props.sharedMemPerBlockOptin) return PrefillKernel::Mma;
  return PrefillKernel::Sm90;
}

const char* prefill_kernel_name(PrefillKernel k) {
  return k == PrefillKernel::Sm90 ? "sm90" : "mma";
}

}  // namespace tandem::cuda
