// Private to the prefill attention kernels (cuda_attention_prefill.cu, mma.sync;
// cuda_attention_prefill_sm90.cu, wgmma): how a CTA finds its query tile and what it
// knows about the tile's rows. M = packed query rows per CTA (GQA packing: the rows of
// one (sequence row, kv head) are the pairs (token i, head-in-group r) in the order
// i·G + r), THREADS = the CTA's threads.
#pragma once

#include <climits>

#include "backend/cuda/cuda_attention.cuh"

namespace tandem::attn {

// Query tiles of a row: none for rows of fewer than 2 tokens (the decode kernel's).
template <int M>
__device__ __forceinline__ int row_tiles(const int32_t* starts, int b, int group) {
  const int n = starts[b + 1] - starts[b];
  return n >= 2 ? (n * group + M - 1) / M : 0;
}

// Finds the (row, tile of that row) of query tile `tile`, tiles numbered row by row.
// Whole CTA; returns false when `tile` is past the last one.
template <int M, int THREADS>
__device__ bool find_tile(const AttnArgs& a, int tile, int& row, int& row_tile) {
  static_assert(THREADS % 32 == 0);
  __shared__ int s_warp_sum[THREADS / 32];
  __shared__ int s_found[2];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int per = (a.num_rows + THREADS - 1) / THREADS;
  const int b0 = min(a.num_rows, tid * per), b1 = min(a.num_rows, b0 + per);
  int count = 0;
  for (int b = b0; b < b1; b++) count += row_tiles<M>(a.seq_starts, b, a.group);
  int incl = count;  // inclusive warp scan
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += y;
  }
  if (lane == 31) s_warp_sum[warp] = incl;
  if (tid == 0) s_found[0] = -1;
  __syncthreads();
  int offset = incl - count;
  for (int w = 0; w < warp; w++) offset += s_warp_sum[w];
  if (tile >= offset && tile < offset + count) {
    for (int b = b0; b < b1; b++) {
      const int n = row_tiles<M>(a.seq_starts, b, a.group);
      if (tile < offset + n) {
        s_found[0] = b;
        s_found[1] = tile - offset;
        break;
      }
      offset += n;
    }
  }
  __syncthreads();
  row = s_found[0];
  row_tile = s_found[1];
  return row >= 0;
}

// The CTA's query rows: positions, visible key ranges and q/out offsets, plus the key
// range of the whole tile. Invalid rows (past the row's queries) get an empty range;
// valid rows come first.
template <int M>
struct TileRows {
  int64_t off[M];      // element offset of the row in q and out; -1 = no row
  int lo[M];           // first visible key
  int hi[M];           // last visible key (its position, or its image's last); -1 = no row
  int kmin, kmax;      // union of the ranges: the keys to load
  int hi_min, lo_max;  // keys in [lo_max, hi_min] are visible to every row
};

// Whole CTA (THREADS >= M); ends with a barrier.
template <int M>
__device__ void setup_rows(TileRows<M>& t, const AttnArgs& a, int row, int row_tile, int kvh) {
  const int tid = threadIdx.x;
  if (tid == 0) {
    t.kmin = INT_MAX;
    t.kmax = -1;
    t.hi_min = INT_MAX;
    t.lo_max = -1;
  }
  __syncthreads();
  if (tid < M) {
    const int t0 = a.seq_starts[row], n = a.seq_starts[row + 1] - t0;
    const int idx = row_tile * M + tid;
    if (idx < n * a.group) {
      const int tok = t0 + idx / a.group, head = kvh * a.group + idx % a.group;
      const int p = a.positions[tok];
      const int lo = first_key(p, a.window);
      int hi = p;
      if (a.media_ends) hi = max(hi, a.media_ends[tok] - 1);  // the rest of its image
      t.off[tid] = (int64_t(tok) * a.num_q_heads + head) * a.head_dim;
      t.lo[tid] = lo;
      t.hi[tid] = hi;
      atomicMin(&t.kmin, lo);
      atomicMax(&t.kmax, hi);
      atomicMin(&t.hi_min, hi);
      atomicMax(&t.lo_max, lo);
    } else {
      t.off[tid] = -1;
      t.lo[tid] = 1;
      t.hi[tid] = -1;
    }
  }
  __syncthreads();
}

// O / l as bf16 for the thread's two rows r0, r0 + 8 (fragment layout of
// cuda_attention.cuh); columns past the head dim are padding. Every lane of the warp
// calls it (the quad sums).
template <int M, int NV>
__device__ __forceinline__ void store_rows(const AttnArgs& a, const TileRows<M>& t, int r0,
                                           const float (&o)[NV][4], const float (&l)[2], int col0,
                                           int lane) {
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const float sum = quad_sum(l[r]);
    inv[r] = sum > 0.f ? 1.f / sum : 0.f;
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int64_t off = t.off[r0 + 8 * r];
    if (off < 0) continue;
#pragma unroll
    for (int nv = 0; nv < NV; nv++) {
      const int col = col0 + nv * 8 + 2 * (lane & 3);
      if (col < a.head_dim)
        *reinterpret_cast<__nv_bfloat162*>(a.out + off + col) =
            __floats2bfloat162_rn(o[nv][2 * r] * inv[r], o[nv][2 * r + 1] * inv[r]);
    }
  }
}

}  // namespace tandem::attn
