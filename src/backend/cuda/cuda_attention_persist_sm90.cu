// Prefill attention on Hopper, persistent (CudaOptions::sm90_persist, TANDEM_SM90_PERSIST;
// issue 45): the TMA kernel of cuda_attention_prefill_sm90.cu, bf16 cache, with a fixed grid
// of CTAs (one per SM by default) that each walk (query tile, kv head) work items instead of
// one CTA per item. The item's math is that kernel's, line for line; what changes is what a
// CTA does between items. In that kernel a CTA's fixed cost (set-up, first tile's
// unoverlapped softmax, store) fits as 65 ns of the GPU, 11% of the time at 8k tokens
// (bench/RESULTS.md, "Where the sm90 prefill's time goes, by fit"); here the next item's
// set-up, its Q copy and its first K/V tiles run under the current item's last tiles and
// store.
//
// Schedule (static): FlashAttention-3's order for causal work, without its dynamic counter.
// The kv heads are cut into sections of `section` heads whose K and V fit in L2 together
// (kPersistL2Budget; the last section holds the rest); sections run one after the other, and
// inside one the items go longest first — query tile tiles - 1 - i / heads (tiles
// numbered row by row, so the last tile of a row sees the most keys), kv head i mod heads
// — so the CTAs in flight share their heads' K/V in L2 (d128, bf16: all 8 heads at 8k
// tokens, 2 at 32k, 1 at 128k as the one-CTA-a-tile kernel's launch order has it). Items
// are dealt in rounds of `grid`, CTA c taking the c-th item of even rounds and the
// (grid - 1 - c)-th of odd ones: dealt the same way every round, CTA 0 would get the
// longest item of each (at 8k tokens 13% more work than the last CTA, 6% above the mean,
// against under 1% dealt so). The order's arithmetic is cuda_attention_persist_schedule.h's,
// checked on the host by the tests.
//
// Roles (384 threads, as the other kernel):
//   - producer warp 0 issues K tiles, warp 1 V tiles, by TMA into their rings (V's edge
//     tiles by cp.async with zero-fill), for one item after another: each ring's stage and
//     phase come from a running count of that ring's tiles over the CTA's items, so the
//     first tiles of item i + 1 are issued as soon as item i's consumers release stages;
//   - producer warps 2-3, the scheduler, find item i + 1's (row, tile), fill the one rows
//     buffer (TileRows) once every reader has copied item i's out of it, and copy item
//     i + 1's Q into the one Q buffer once both consumer warpgroups are done with item i's
//     Q (after their last Q·Kᵀ, before their last softmax, P·V and store);
//   - consumer warpgroups 1-2: per item, the other kernel's consume(), with their rows'
//     ranges and output offsets copied into registers at the item's start (so the rows
//     buffer is free for the next item at once) and Q released after the last S, before
//     its softmax.
// One rows buffer and one Q buffer keep the CTA's shared memory at the other kernel's
// (167,040 B at d128 in all, under the 164 KiB carve-out: a first persistent try with a
// second rows buffer crossed it and lost 4% at every length, bench/RESULTS.md, 2026-12-02).
//
// mbarriers besides the rings' (phases: the n-th item of the CTA completes each once, so
// its parity is n & 1; a waiter for the (n-1)-th release waits for parity (n - 1) & 1):
//   rows_full  (64: the scheduler threads) item n's rows are in the buffer (row < 0: none)
//   rows_empty (320: warps 0-1 and the 256 consumer threads) they have copied item n's
//   full_q     (64: the scheduler's cp.async arrivals) item n's Q has landed
//   empty_q    (256) both consumer warpgroups are done reading item n's Q
// No deadlock: every wait is on a release given for an earlier item or an earlier tile in
// the one order all roles walk (items in the CTA's order, tiles in order inside them), as
// in the other kernel's argument with the tiles of consecutive items numbered on.
// Ping-pong: each item opens with warpgroup 1's arrival on barrier 1 and closes without
// its last arrival, so the named barriers balance item by item.
#include <algorithm>
#include <atomic>
#include <climits>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_attention_persist_schedule.h"
#include "backend/cuda/cuda_attention_prefill_tiles.cuh"
#include "backend/cuda/cuda_attention_sm90.cuh"
#include "backend/cuda/cuda_attention_sm90_load.cuh"
#include "backend/cuda/cuda_attention_sm90_prefill.cuh"
#include "backend/cuda/cuda_attention_sm90_softmax.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_mbarrier.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "cuda_attention_persist_sm90.cu needs sm_90a (wgmma, setmaxnreg): see CMakeLists.txt"
#endif

namespace tandem::attn {

namespace {

using namespace sm90_prefill;

constexpr int kSchedThreads = 64;  // producer warps 2-3
constexpr int kSchedBar = 3;       // their named barrier (1 and 2: the consumers' turns)
constexpr uint32_t kRowReaders = 64 + 256;

// The item the scheduler publishes: its rows, and which (row, kv head) it is.
struct Item {
  TileRows<kBlockM> rows;
  int row;  // < 0: no more items
  int kvh;
};

struct ItemBars {
  uint64_t rows_full, rows_empty, full_q, empty_q;
};

// ---------------------------------------------------------------- scheduler

// One warp: query tiles in all (row_tiles summed over the rows).
__device__ int count_tiles(const AttnArgs& a, int lane) {
  int n = 0;
  for (int b = lane; b < a.num_rows; b += 32) n += row_tiles<kBlockM>(a.seq_starts, b, a.group);
#pragma unroll
  for (int d = 16; d >= 1; d /= 2) n += __shfl_xor_sync(0xffffffffu, n, d);
  return n;
}

// One warp: the (row, tile of that row) of query tile `tile` < count_tiles, tiles numbered
// row by row. Rows are scanned 32 at a time; every shuffle runs in all lanes.
__device__ void locate_tile(const AttnArgs& a, int tile, int& row, int& row_tile, int lane) {
  int base = 0;
  for (int b0 = 0; b0 < a.num_rows; b0 += 32) {
    const int b = b0 + lane;
    const int n = b < a.num_rows ? row_tiles<kBlockM>(a.seq_starts, b, a.group) : 0;
    int incl = n;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    const int chunk = __shfl_sync(0xffffffffu, incl, 31);
    if (tile < base + chunk) {  // uniform: in this chunk, at the first lane whose end passes it
      const int l = __ffs(__ballot_sync(0xffffffffu, tile < base + incl)) - 1;
      const int end = __shfl_sync(0xffffffffu, incl, l), len = __shfl_sync(0xffffffffu, n, l);
      row = b0 + l;
      row_tile = tile - (base + end - len);
      return;
    }
    base += chunk;
  }
  row = -1;  // unreachable for tile < count_tiles
  row_tile = 0;
}

// The rows of (row, row_tile, kvh) into it, by the 64 scheduler threads (stid 0..63), as
// setup_rows does with the whole CTA; ends with their barrier.
__device__ void fill_item(Item& it, const AttnArgs& a, int row, int row_tile, int kvh, int stid) {
  TileRows<kBlockM>& t = it.rows;
  if (stid == 0) {
    t.kmin = INT_MAX;
    t.kmax = -1;
    t.hi_min = INT_MAX;
    t.lo_max = -1;
    it.row = row;
    it.kvh = kvh;
  }
  sm90::named_bar_sync(kSchedBar, kSchedThreads);
  for (int r = stid; r < kBlockM; r += kSchedThreads) setup_row(t, a, row, row_tile, kvh, r);
  sm90::named_bar_sync(kSchedBar, kSchedThreads);
}

// The scheduler warps: every item of this CTA in order, then the closing item (row -1).
template <int D>
__device__ void schedule(const AttnArgs& a, int section, Item& it, ItemBars& bars, uint32_t q_smem,
                         int stid) {
  const int lane = stid & 31;
  const int tiles = count_tiles(a, lane);
  const int items = tiles * a.num_kv_heads;
  int n = 0;  // items published
  for (;; n++) {
    const int w = persist_item(n, int(blockIdx.x), int(gridDim.x));
    if (w >= items) break;  // later rounds start past it
    int tile, kvh;
    persist_item_tile(w, tiles, a.num_kv_heads, section, tile, kvh);
    int row, row_tile;
    locate_tile(a, tile, row, row_tile, lane);
    if (n > 0) cuda::mbar_wait(&bars.rows_empty, uint32_t((n - 1) & 1));
    fill_item(it, a, row, row_tile, kvh, stid);
    cuda::mbar_arrive(&bars.rows_full);
    if (n > 0) cuda::mbar_wait(&bars.empty_q, uint32_t((n - 1) & 1));
    sm90::load_q_sw<D, kBlockM, kSchedThreads>(q_smem, it.rows, a, stid);
    sm90::cp_async_arrive_noinc(cuda::mbar_smem_addr(&bars.full_q));
  }
  if (n > 0) cuda::mbar_wait(&bars.rows_empty, uint32_t((n - 1) & 1));
  if (stid == 0) it.row = -1;
  cuda::mbar_arrive(&bars.rows_full);
  asm volatile("cp.async.wait_all;\n" ::: "memory");  // Q landed before the thread leaves
}

// ---------------------------------------------------------------- producer

// Producer warp 0 (K) or 1 (V): the ring's tiles of every item, as produce_tma issues them
// for one; g counts the ring's tiles over the items (stage g mod S, its (g / S)-th use).
template <int D>
__device__ void produce_ring(const AttnArgs& a, const Item& it, ItemBars& bars, const Ring& ring,
                             bool v_warp, const CUtensorMap* map, int lane) {
  using C = Config<D, false>;
  const int stages = v_warp ? C::kStagesV : C::kStagesK;
  uint64_t* full = v_warp ? ring.full_v : ring.full_k;
  uint64_t* empty = v_warp ? ring.empty_v : ring.empty_k;
  const uint32_t base = v_warp ? ring.v : ring.k;
  const int box = a.block_size < C::kBlockN ? a.block_size : C::kBlockN;
  if (lane == 0) sm90::prefetch_tensor_map(map);
  uint32_t g = 0;
  for (int n = 0;; n++) {
    cuda::mbar_wait(&bars.rows_full, uint32_t(n & 1));
    const int row = it.row, kvh = it.kvh, rkmin = it.rows.kmin, rkmax = it.rows.kmax;
    cuda::mbar_arrive(&bars.rows_empty);
    if (row < 0) break;
    const int32_t* bt_row = a.block_table + int64_t(row) * a.max_blocks;
    const int kmin = rkmin & -box;
    const int num_tiles = (rkmax - kmin) / C::kBlockN + 1;
    for (int t = 0; t < num_tiles; t++, g++) {
      const int s = int(g % uint32_t(stages));
      const uint32_t use = g / uint32_t(stages);
      if (use > 0) cuda::mbar_wait(&empty[s], (use - 1) & 1);
      const uint32_t dst = base + uint32_t(s * C::kTileBytes);
      const int kt = kmin + t * C::kBlockN;
      if (v_warp && (kt < rkmin || kt + C::kBlockN - 1 > rkmax)) {
        sm90::load_tile_sw_warp<D, C::kBlockN>(dst, static_cast<const bf16*>(a.v), a, bt_row, kvh,
                                               kt, rkmin, rkmax, lane);
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        sm90::fence_proxy_async();
        __syncwarp();
        if (lane == 0) cuda::mbar_arrive(&full[s]);
        continue;
      }
      if (lane == 0) cuda::mbar_arrive_expect(&full[s], uint32_t(C::kTileBytes));
      __syncwarp();
      sm90::load_tile_tma<D, C::kBlockN>(dst, map, a, bt_row, kvh, kt,
                                         cuda::mbar_smem_addr(&full[s]), lane);
    }
  }
}

// ---------------------------------------------------------------- consumers

// Arrives on bar where `cond` holds, without a branch (a predicated arrive): the consumer's
// tile loop stays branch-free, so ptxas still sees which wgmma group each wait retires.
__device__ __forceinline__ void mbar_arrive_if(uint64_t* bar, bool cond) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %1, 0;\n"
      " @p mbarrier.arrive.shared::cta.b64 _, [%0];\n}" ::"r"(cuda::mbar_smem_addr(bar)),
      "r"(int(cond))
      : "memory");
}

// What a consumer thread keeps of its two rows for one item.
struct ItemRowsRegs {
  ConsumerRows cr;
  int64_t off[2];  // output offsets; -1 = no row
  int num_tiles;
};

// O / l as bf16 for the thread's two rows: store_rows (cuda_attention_prefill_tiles.cuh)
// with the output offsets in registers. Every lane of the warp calls it (the quad sums).
template <int NV>
__device__ __forceinline__ void store_regs(const AttnArgs& a, const int64_t (&off)[2],
                                           const float (&o)[NV][4], const float (&l)[2], int lane) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float sum = quad_sum(l[r]);
    inv[r] = sum > 0.f ? 1.f / sum : 0.f;
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    if (off[r] < 0) continue;
#pragma unroll
    for (int nv = 0; nv < NV; nv++) {
      const int col = nv * 8 + 2 * (lane & 3);
      if (col < a.head_dim)
        *reinterpret_cast<__nv_bfloat162*>(a.out + off[r] + col) =
            __floats2bfloat162_rn(o[nv][2 * r] * inv[r], o[nv][2 * r + 1] * inv[r]);
    }
  }
}

// The thread's rows r0, r0 + 8 of the item in `it`, and the item's key tiles (from kmin
// rounded down to a TMA box, as the producer walks them).
template <int D>
__device__ __forceinline__ ItemRowsRegs read_item(const AttnArgs& a, const Item& it, int r0) {
  constexpr int kBlockN = Config<D>::kBlockN;
  const TileRows<kBlockM>& t = it.rows;
  const int box = a.block_size < kBlockN ? a.block_size : kBlockN;
  const int kmin = t.kmin & -box;
  ItemRowsRegs x;
  x.cr = ConsumerRows{{t.lo[r0], t.lo[r0 + 8]}, {t.hi[r0], t.hi[r0 + 8]}, kmin, t.hi_min, t.lo_max};
  x.off[0] = t.off[r0];
  x.off[1] = t.off[r0 + 8];
  x.num_tiles = (t.kmax - kmin) / kBlockN + 1;
  return x;
}

// One item for warpgroup cw (rows 64·cw .. 64·cw + 63): consume() of
// cuda_attention_prefill_sm90.cu with TMA and the ping-pong, its key tiles numbered from
// g in the rings, Q's phase q_parity, and Q released (empty_q) as soon as the item's last
// S is complete, before its softmax, so that the next item's Q copy runs under the last
// softmax, the last P·V and the store.
template <int D>
__device__ void consume_item(const AttnArgs& a, const ItemRowsRegs& x, ItemBars& bars,
                             const Ring& ring, int cw, uint32_t g, uint32_t q_parity) {
  using C = Config<D>;
  constexpr int kBlockN = C::kBlockN, NV = D / 8, SK = C::kStagesK, SV = C::kStagesV;
  const int lane = int(threadIdx.x) & 31;
  const ConsumerRows& cr = x.cr;
  const int num_tiles = x.num_tiles;
  const uint32_t q_rows = ring.q + uint32_t(cw * 64 * 128);  // 64 rows = 8 swizzle atoms
  auto k_tile = [&](int t) { return ring.k + uint32_t(((g + t) % SK) * C::kTileBytes); };
  auto v_tile = [&](int t) { return ring.v + uint32_t(((g + t) % SV) * C::kTileBytes); };
  auto full_k = [&](int t) { wait_full<false>(&ring.full_k[(g + t) % SK], ((g + t) / SK) & 1); };
  auto full_v = [&](int t) { wait_full<false>(&ring.full_v[(g + t) % SV], ((g + t) / SV) & 1); };
  float o[NV][4], s[kBlockN / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float alpha[2];
  uint32_t pa[kBlockN / 16][4];
#pragma unroll
  for (int nv = 0; nv < NV; nv++) o[nv][0] = o[nv][1] = o[nv][2] = o[nv][3] = 0.f;
#pragma unroll
  for (int nt = 0; nt < kBlockN / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;

  wait_full<true>(&bars.full_q, q_parity);  // Q's cp.async writes
  if (cw == 1) sm90::named_bar_arrive(1, 256);
  full_k(0);
  turn_begin<true>(cw);
  issue_qk<D>(s, q_rows, k_tile(0));
  turn_end<true>(cw, false);
  sm90::wgmma_wait<0>();
  sm90::fence_operands(s);
  cuda::mbar_arrive(&ring.empty_k[g % SK]);
  mbar_arrive_if(&bars.empty_q, num_tiles == 1);               // the item's last S: Q is free
  score_and_softmax<kBlockN>(s, a, cr, 0, m, l, alpha, lane);  // O = 0: alpha unused
  pack_p<kBlockN>(pa, s);
  sm90::fence_operands(o);
  sm90::fence_operands(pa);
  for (int t = 0; t + 1 < num_tiles; t++) {  // as consume(): no branch inside
    full_k(t + 1);
    turn_begin<true>(cw);
    issue_qk<D>(s, q_rows, k_tile(t + 1));
    full_v(t);
    issue_pv<D>(o, pa, v_tile(t));
    turn_end<true>(cw, false);
    sm90::wgmma_wait<1>();  // S(t + 1) complete; P(t)·V(t) may still run
    sm90::fence_operands(s);
    cuda::mbar_arrive(&ring.empty_k[(g + t + 1) % SK]);
    mbar_arrive_if(&bars.empty_q, t + 2 == num_tiles);  // the item's last S: Q is free
    score_and_softmax<kBlockN>(s, a, cr, t + 1, m, l, alpha, lane);
    sm90::wgmma_wait<0>();
    sm90::fence_operands(o);
    sm90::fence_operands(pa);
    cuda::mbar_arrive(&ring.empty_v[(g + t) % SV]);
    rescale_o<NV>(o, alpha);
    pack_p<kBlockN>(pa, s);
    sm90::fence_operands(o);  // written before the next S group opens
    sm90::fence_operands(pa);
  }
  const int last = num_tiles - 1;
  turn_begin<true>(cw);
  full_v(last);
  issue_pv<D>(o, pa, v_tile(last));
  turn_end<true>(cw, true);
  sm90::wgmma_wait<0>();
  sm90::fence_operands(o);
  cuda::mbar_arrive(&ring.empty_v[(g + last) % SV]);
  store_regs<NV>(a, x.off, o, l, lane);
}

// A consumer warpgroup (cw = 0 or 1): every item the scheduler publishes, until the
// closing one. g counts the key tiles of the items done (both rings advance by an item's
// tiles).
template <int D>
__device__ void consume_items(const AttnArgs& a, const Item& it, ItemBars& bars, const Ring& ring,
                              int cw) {
  const int wtid = int(threadIdx.x) - 128 * (cw + 1), lane = wtid & 31, warp = wtid >> 5;
  const int r0 = cw * 64 + warp * 16 + (lane >> 2);
  uint32_t g = 0;
  for (int n = 0;; n++) {
    cuda::mbar_wait(&bars.rows_full, uint32_t(n & 1));
    const bool done = it.row < 0;
    ItemRowsRegs x{};
    if (!done) x = read_item<D>(a, it, r0);
    cuda::mbar_arrive(&bars.rows_empty);  // the rows buffer is the next item's
    if (done) break;
    consume_item<D>(a, x, bars, ring, cw, g, uint32_t(n & 1));
    g += uint32_t(x.num_tiles);
  }
}

// ---------------------------------------------------------------- kernel

template <int D>
__global__ void __launch_bounds__(kSm90Threads, 1)
    prefill_persist_kernel(AttnArgs a, const __grid_constant__ CUtensorMap map_k,
                           const __grid_constant__ CUtensorMap map_v, int section) {
  using C = Config<D, false>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ Item item;
  __shared__ __align__(8) uint64_t bars[4][C::kStagesMax];  // full K, empty K, full V, empty V
  __shared__ ItemBars ib;
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStagesK; s++) {
      cuda::mbar_init(&bars[0][s], 1);  // the TMA arrival with its bytes
      cuda::mbar_init(&bars[1][s], 256);
    }
    for (int s = 0; s < C::kStagesV; s++) {
      cuda::mbar_init(&bars[2][s], 1);
      cuda::mbar_init(&bars[3][s], 256);
    }
    cuda::mbar_init(&ib.rows_full, kSchedThreads);
    cuda::mbar_init(&ib.rows_empty, kRowReaders);
    cuda::mbar_init(&ib.full_q, kSchedThreads);
    cuda::mbar_init(&ib.empty_q, 256);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // for the async proxy
  }
  __syncthreads();
  Ring ring;
  ring.q = (smem_addr(smem_raw) + 1023u) & ~1023u;
  ring.k = ring.q + uint32_t(C::kQBytes);
  ring.v = ring.k + uint32_t(C::kStagesK * C::kTileBytes);
  ring.raw = ring.v + uint32_t(C::kStagesV * C::kTileBytes);
  ring.full_k = bars[0];
  ring.empty_k = bars[1];
  ring.full_v = bars[2];
  ring.empty_v = bars[3];
  ring.full_q = &ib.full_q;
  const int wg = int(threadIdx.x) / 128;
  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs>();
    const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) & 31;
    if (warp < 2)
      produce_ring<D>(a, item, ib, ring, warp == 1, warp == 1 ? &map_v : &map_k, lane);
    else
      schedule<D>(a, section, item, ib, ring.q, int(threadIdx.x) - 64);
  } else {
    sm90::setmaxnreg_inc<kConsumerRegs>();
    consume_items<D>(a, item, ib, ring, wg - 1);
  }
}

template <int D>
void launch(const AttnArgs& a, const CUtensorMap& map_k, const CUtensorMap& map_v, int ctas,
            cudaStream_t stream) {
  constexpr int smem = Config<D>::kSmem;
  auto kernel = prefill_persist_kernel<D>;
  static std::atomic<uint64_t> smem_ready;
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem, smem_ready,
                           "attention prefill (sm90, persistent)");
  // Never more CTAs than items (the host's bound on the tiles: the other kernel's grid).
  const int64_t tiles = (int64_t(a.num_tokens) * a.group + kBlockM - 1) / kBlockM + a.num_rows;
  const int64_t items = tiles * a.num_kv_heads;
  cuda_require(items < INT_MAX, "attention prefill (sm90, persistent): too many query tiles");
  const int grid = int(std::min<int64_t>(std::max(ctas, 1), items));
  // A head's keys are bounded by the block table's width (the step's longest row).
  const int section =
      persist_l2_section(a.num_kv_heads, int64_t(a.max_blocks) * a.block_size, a.head_dim);
  kernel<<<grid, kSm90Threads, smem, stream>>>(a, map_k, map_v, section);
  TANDEM_CUDA_LAUNCHED("attention prefill kernel (sm90, persistent)");
}

}  // namespace

void launch_prefill_persist_sm90(const AttnArgs& a, const CUtensorMap& map_k,
                                 const CUtensorMap& map_v, int ctas, cudaStream_t stream) {
  switch (sm90_padded_head_dim(a.head_dim)) {
    case 64:
      return launch<64>(a, map_k, map_v, ctas, stream);
    case 128:
      return launch<128>(a, map_k, map_v, ctas, stream);
    case 256:
      return launch<256>(a, map_k, map_v, ctas, stream);
    default:
      cuda_fail("attention prefill (sm90, persistent): head dim outside (32, 256]");
  }
}

}  // namespace tandem::attn
