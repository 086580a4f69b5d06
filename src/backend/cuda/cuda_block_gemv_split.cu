// The split-K weight stream of 1–2 row k-quant linears (Q4_K, Q5_K, Q6_K;
// cuda_block_gemv_split.h). Same arithmetic as the warp stream of cuda_block_linear.cu: x
// quantized per 32 values (xq, dx, xs from quantize_x_kernel), two dp4a an octet, then
//     y += d_x · s · Σ u·q + (b − s·o) · d_x · Σ q
// What changes is who reads what:
//   split K: a CTA of kSplitWarps warps takes kRows rows; its warps share K (8 lanes a
//     256-value super-block, a warp 4 super-blocks a step, the warps interleaved), then sum
//     through shared memory. The warp stream gives a whole row pair to one warp: at N = 1024
//     (k, v of the 8B shape) that is 512 warps on 132 SMs, ~4 a SM, too few loads in flight.
//   wide reads: lane t of a super-block reads its bytes once, each used for all the values it
//     holds: Q4_K / Q5_K 16 bytes of qs (low nibbles of group 2j, high of 2j + 1) in one
//     16-byte load; Q6_K 8 bytes of each of ql, ql + 32, qh (all four runs of 32). The warp
//     stream's octet reads load each qs byte twice (once a nibble) and Q6_K's qh four times.
// Measured on an H100 (bench/RESULTS.md, 2026-12-06 fifth session) against the warp stream,
// µs a layer of the 8B shape: one row Q4_K 77 vs 80, Q6_K 98 vs 130; two rows 87 vs 89 and
// 126 vs 134; from 4 rows on it is no faster (Q6_K at 8 rows 280 vs 232), so 3–8 rows keep
// the warp stream. The 8B shape in Q4_K_M decodes one stream at 291 tok/s where the warp
// stream gave 242. (Three other layouts measured in the same run — one row a CTA with the
// warp stream's octet reads, one row and four rows a CTA with wide reads — lost and went.)
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_decode.cuh"
#include "backend/cuda/cuda_block_gemv_split.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;
using cuda::Octet;
using cuda::Octets;

constexpr int kSplitWarps = 4;  // warps per CTA, sharing K
constexpr int kSbLanes = 8;     // lanes per 256-value super-block (32 values a lane)
constexpr int kRows = 2;        // weight rows a CTA streams together

// Lane t's 4 octets of one super-block and their first values' offsets in it (kk[j]), read
// wide (above). kPaired: octets 2p and 2p + 1 are 16 consecutive values of one group (x read
// in 16 bytes).
template <DType T>
struct LaneOctets;

// Byte k (< 12, not known at compile time) of three words, by selects (no local memory).
__device__ __forceinline__ int byte_of(const uint32_t (&w)[3], int k) {
  const uint32_t word = k < 4 ? w[0] : k < 8 ? w[1] : w[2];
  return int((word >> (8 * (k % 4))) & 0xFFu);
}

// ggml::k4_scale_min from the 12 scale bytes held in words.
__device__ __forceinline__ void k4_scale_min_words(int g, const uint32_t (&w)[3], int& sc,
                                                   int& mn) {
  if (g < 4) {
    sc = byte_of(w, g) & 63;
    mn = byte_of(w, g + 4) & 63;
  } else {
    sc = (byte_of(w, g + 4) & 0xF) | ((byte_of(w, g - 4) >> 6) << 4);
    mn = (byte_of(w, g + 4) >> 4) | ((byte_of(w, g) >> 6) << 4);
  }
}

// Q4_K / Q5_K: lane t = 2j + h takes l in [16h, 16h + 16) of groups 2j (low nibbles) and
// 2j + 1 (high): qs[32j + 16h, +16) in one load (blocks of 144 / 176 bytes keep 16-byte
// alignment). Q5_K's 5th bits: bit g of qh[l], the same 16 bytes for both groups.
template <DType T>
__device__ __forceinline__ void k4_wide(const uint8_t* p, int t, Octet (&q)[4], int (&kk)[4]) {
  constexpr bool kQ5 = T == DType::Q5_K;
  // d, dmin and the 12 scale bytes (same place in both types): one 16-byte load.
  const uint4 head = *reinterpret_cast<const uint4*>(p);
  const int j = t / 2, h = t % 2;
  const uint8_t* qs = p + (kQ5 ? 48 : 16) + 32 * j + 16 * h;
  const uint4 v = *reinterpret_cast<const uint4*>(qs);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t hw[4] = {0, 0, 0, 0};
  if constexpr (kQ5) {
    const uint4 hv = *reinterpret_cast<const uint4*>(p + 16 + 16 * h);
    hw[0] = hv.x, hw[1] = hv.y, hw[2] = hv.z, hw[3] = hv.w;
  }
  const float d = cuda::half_to_f32(uint16_t(head.x)),
              dmin = cuda::half_to_f32(uint16_t(head.x >> 16));
  const uint32_t scales[3] = {head.y, head.z, head.w};
#pragma unroll
  for (int i = 0; i < 2; i++) {  // group g = 2j + i
    const int g = 2 * j + i;
    int sc, mn;
    k4_scale_min_words(g, scales, sc, mn);
#pragma unroll
    for (int o = 0; o < 2; o++) {  // octet 2i + o: l in [16h + 8o, +8)
      Octet& r = q[2 * i + o];
#pragma unroll
      for (int x = 0; x < 2; x++) {
        r.lv[x] = (w[2 * o + x] >> (4 * i)) & 0x0F0F0F0Fu;
        if constexpr (kQ5) r.lv[x] |= ((hw[2 * o + x] >> g) & 0x01010101u) << 4;
      }
      r.s = d * float(sc);
      r.b = -dmin * float(mn);
      kk[2 * i + o] = 32 * g + 16 * h + 8 * o;
    }
  }
}

template <>
struct LaneOctets<DType::Q4_K> {
  static constexpr bool kPaired = true;
  __device__ static void get(const uint8_t* p, int t, Octet (&q)[4], int (&kk)[4]) {
    k4_wide<DType::Q4_K>(p, t, q, kk);
  }
};

template <>
struct LaneOctets<DType::Q5_K> {
  static constexpr bool kPaired = true;
  __device__ static void get(const uint8_t* p, int t, Octet (&q)[4], int (&kk)[4]) {
    k4_wide<DType::Q5_K>(p, t, q, kk);
  }
};

// Q6_K: lane t = 4n + c takes l in [8c, 8c + 8) of half n, all four runs r: the nibbles of
// ql[64n + 32 (r mod 2) + l] (low for r < 2), 2 bits of qh[32n + l] at shift 2r. Blocks of
// 210 bytes are 2-byte aligned: words in halves.
template <>
struct LaneOctets<DType::Q6_K> {
  static constexpr bool kPaired = false;
  __device__ static void get(const uint8_t* p, int t, Octet (&q)[4], int (&kk)[4]) {
    const auto* b = reinterpret_cast<const ggml::BlockQ6_K*>(p);
    const int n = t / 4, l0 = 8 * (t % 4);
    uint32_t lo[2][2], hi[2];
#pragma unroll
    for (int x = 0; x < 2; x++) {
      lo[0][x] = cuda::word_at<false>(b->ql + 64 * n + l0 + 4 * x);
      lo[1][x] = cuda::word_at<false>(b->ql + 64 * n + 32 + l0 + 4 * x);
      hi[x] = cuda::word_at<false>(b->qh + 32 * n + l0 + 4 * x);
    }
    const float d = cuda::half_to_f32(b->d);
#pragma unroll
    for (int r = 0; r < 4; r++) {
#pragma unroll
      for (int x = 0; x < 2; x++)
        q[r].lv[x] = ((lo[r % 2][x] >> (4 * (r / 2))) & 0x0F0F0F0Fu) |
                     (((hi[x] >> (2 * r)) & 0x03030303u) << 4);
      kk[r] = 128 * n + 32 * r + l0;
      q[r].s = d * float(b->scales[kk[r] / 16]);
      q[r].b = 0.f;
    }
  }
};

// One x row's quantized values under a lane's 4 octets (at k0 + kk[j]): paired octets in
// 16-byte loads of xq, one dx and a float2 of xs a pair; else 8 bytes, a dx and an xs each.
template <bool kPaired>
__device__ __forceinline__ void load_x(const int8_t* xq, const float* dx, const float* xs, int k0,
                                       const int (&kk)[4], uint2 (&xv)[4], float (&d)[4],
                                       float (&xsum)[4]) {
#pragma unroll
  for (int j = 0; j < 4; j += kPaired ? 2 : 1) {
    const int k = k0 + kk[j];
    if constexpr (kPaired) {
      const uint4 v = *reinterpret_cast<const uint4*>(xq + k);
      const float2 s = *reinterpret_cast<const float2*>(xs + k / 8);
      xv[j] = make_uint2(v.x, v.y), xv[j + 1] = make_uint2(v.z, v.w);
      d[j] = d[j + 1] = dx[k / 32];
      xsum[j] = s.x, xsum[j + 1] = s.y;
    } else {
      xv[j] = *reinterpret_cast<const uint2*>(xq + k);
      d[j] = dx[k / 32];
      xsum[j] = xs[k / 8];
    }
  }
}

// out [rows, N] = x · W'ᵀ (+ bias), rows <= M; operands as block_gemv_kernel's
// (cuda_block_linear.cu). K % 256 == 0 (the k-quants' super-blocks).
// grid: ceil(N / R), block kSplitWarps · 32
template <DType T, int M, int R>
__global__ void __launch_bounds__(kSplitWarps * 32)
    gemv_split_kernel(void* __restrict__ out, bool out_f32, const uint8_t* __restrict__ w,
                      const int8_t* __restrict__ xq, const float* __restrict__ dx,
                      const float* __restrict__ xs, const bf16* __restrict__ bias, int rows, int N,
                      int K) {
  using O = Octets<T>;
  __shared__ float part[kSplitWarps][R][M];
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  const int n0 = int(blockIdx.x) * R, blocks = K / O::kElems, t = lane % kSbLanes;
  const int64_t row_bytes = int64_t(blocks) * O::kBytes;
  const uint8_t* wr[R];
#pragma unroll
  for (int r = 0; r < R; r++) wr[r] = w + int64_t(min(n0 + r, N - 1)) * row_bytes;
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int m = 0; m < M; m++) acc[r][m] = 0.f;
  constexpr int kWarpBlocks = 32 / kSbLanes;
#pragma unroll 2
  for (int sb = kWarpBlocks * warp + lane / kSbLanes; sb < blocks;
       sb += kWarpBlocks * kSplitWarps) {
    Octet q[R][4];
    int kk[4];
#pragma unroll
    for (int r = 0; r < R; r++)
      LaneOctets<T>::get(wr[r] + int64_t(sb) * O::kBytes, t, q[r], kk);
#pragma unroll
    for (int m = 0; m < M; m++) {
      if (m >= rows) break;
      uint2 xv[4];
      float d[4], xsum[4];
      load_x<LaneOctets<T>::kPaired>(xq + int64_t(m) * K, dx + int64_t(m) * (K / 32),
                                            xs + int64_t(m) * (K / 8), sb * O::kElems, kk, xv, d,
                                            xsum);
#pragma unroll
      for (int j = 0; j < 4; j++)
#pragma unroll
        for (int r = 0; r < R; r++) {
          const int isum =
              __dp4a(int(q[r][j].lv[0]), int(xv[j].x), __dp4a(int(q[r][j].lv[1]), int(xv[j].y), 0));
          const float a = fmaf(d[j] * q[r][j].s, float(isum), acc[r][m]);
          acc[r][m] = fmaf(q[r][j].b - q[r][j].s * float(O::kOffset), xsum[j], a);
        }
    }
  }
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int m = 0; m < M; m++) {
      const float s = cuda::warp_sum(acc[r][m]);
      if (lane == 0) part[warp][r][m] = s;
    }
  __syncthreads();
  const int i = int(threadIdx.x), r = i / M, m = i % M, n = n0 + r;
  if (i >= R * M || m >= rows || n >= N) return;
  float s = 0.f;
#pragma unroll
  for (int v = 0; v < kSplitWarps; v++) s += part[v][r][m];
  if (bias != nullptr) s += __bfloat162float(bias[n]);
  if (out_f32)
    static_cast<float*>(out)[int64_t(m) * N + n] = s;
  else
    static_cast<bf16*>(out)[int64_t(m) * N + n] = __float2bfloat16_rn(s);
}

template <DType T, int M>
void launch(CudaBackend& be, Tensor& out, const Tensor& w, const GemvX& x, const Tensor& bias) {
  const int N = int(w.dim(0)), K = int(w.dim(1));
  cuda::launch_pdl("gemv_split_kernel", &gemv_split_kernel<T, M, kRows>,
                   dim3(unsigned(cuda::ceil_div(N, kRows))), dim3(kSplitWarps * 32), 0,
                   be.stream(), out.data, out.dtype == DType::F32, w.ptr<uint8_t>(), x.xq, x.dx,
                   x.xs, bias.defined() ? bias.ptr<bf16>() : nullptr, x.rows, N, K);
}

template <DType T>
void launch_rows(CudaBackend& be, Tensor& out, const Tensor& w, const GemvX& x,
                 const Tensor& bias) {
  if (x.rows == 1) return launch<T, 1>(be, out, w, x, bias);
  launch<T, 2>(be, out, w, x, bias);
}

}  // namespace

bool gemv_split(CudaBackend& be, Tensor& out, const Tensor& w, const GemvX& x,
                const Tensor& bias) {
  if (x.rows < 1 || x.rows > kSplitMaxRows) return false;
  switch (w.dtype) {
    case DType::Q4_K:
      launch_rows<DType::Q4_K>(be, out, w, x, bias);
      return true;
    case DType::Q5_K:
      launch_rows<DType::Q5_K>(be, out, w, x, bias);
      return true;
    case DType::Q6_K:
      launch_rows<DType::Q6_K>(be, out, w, x, bias);
      return true;
    default:
      return false;
  }
}

}  // namespace tandem
