// Rotary position embeddings on CUDA, HF "rotate_half" layout, the function cpu_rope.cpp
// computes: dims i and i + rotary_dim/2 of each head rotate by position * inv_freq[i]
// (f32 product, then cosf/sinf, scaled by attention_factor); dims >= rotary_dim pass.
//
// The spec's inv_freq table travels inside the kernel's parameters (at most kMaxHalf
// floats): no upload, no cache, and a captured CUDA graph keeps its own copy. Dynamic NTK
// needs each row's length (largest position + 1), found by a small per-row kernel first.
//
// Also here: qkv_to_cache, the attention block's split + q/k norm + RoPE + KV write in
// one kernel (one launch per layer instead of six in a decode step).
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kMaxHalf = 512;  // rotary_dim <= 1024

// The spec as the kernel sees it, passed by value (about 2 KB of kernel parameters).
struct RopeArgs {
  float inv_freq[kMaxHalf];  // [half]
  int half = 0;              // rotary_dim / 2
  float attention_factor = 1.f;
  float dynamic_factor = 0.f;  // 0 = not dynamic
  int original_max_position = 0;
  float base = 10000.f;
};

// ---------------------------------------------------------------- kernels

// row_len[t] = 1 + the largest position of t's row, for every token of the row.
//   positions [T], seq_starts [B+1], row_len [T]. One block per row.
__global__ void row_length_kernel(int32_t* __restrict__ row_len,
                                  const int32_t* __restrict__ positions,
                                  const int32_t* __restrict__ seq_starts) {
  __shared__ int32_t warp_max[32];
  const int32_t begin = seq_starts[blockIdx.x], end = seq_starts[blockIdx.x + 1];
  int32_t m = -1;
  for (int32_t t = begin + int32_t(threadIdx.x); t < end; t += int32_t(blockDim.x))
    m = max(m, positions[t]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : -1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) warp_max[0] = m;
  }
  __syncthreads();
  const int32_t len = warp_max[0] + 1;
  for (int32_t t = begin + int32_t(threadIdx.x); t < end; t += int32_t(blockDim.x))
    row_len[t] = len;
}

// inv_freq[i] of a token: the spec's, or HF's dynamic-NTK one for a row of length L beyond
// the original context: base * (factor * L / original - (factor - 1))^(d / (d - 2)).
__device__ __forceinline__ float token_inv_freq(const RopeArgs& a, int i, int32_t L) {
  if (a.dynamic_factor <= 0.f || L <= a.original_max_position) return a.inv_freq[i];
  const int dim = 2 * a.half;
  const float ratio =
      a.dynamic_factor * float(L) / float(a.original_max_position) - (a.dynamic_factor - 1.f);
  const float base = a.base * powf(ratio, float(double(dim) / double(dim - 2)));
  return 1.f / powf(base, float(2 * i) / float(dim));
}

// The per-token cos/sin table of RoPE (scaled by attention_factor) into shared memory:
// cs[i] = cos, cs[half + i] = sin. Every thread of the block takes part.
__device__ __forceinline__ void fill_cos_sin(float* cs, const RopeArgs& args, int32_t position,
                                             int32_t row_len) {
  const float p = float(position);
  for (int i = threadIdx.x; i < args.half; i += blockDim.x) {
    const float angle = p * token_inv_freq(args, i, row_len);
    cs[i] = cosf(angle) * args.attention_factor;
    cs[args.half + i] = sinf(angle) * args.attention_factor;
  }
}

// Rotates the H heads of one token per block.   x [T, H, Dh], positions [T],
// row_len [T] (only read when dynamic)
__global__ void rope_kernel(bf16* __restrict__ x, const int32_t* __restrict__ positions,
                            const int32_t* __restrict__ row_len, int64_t H, int64_t Dh,
                            const RopeArgs args) {
  __shared__ float cs[2 * kMaxHalf];  // [cos (half) | sin (half)], scaled
  const int64_t t = blockIdx.x;
  const int half = args.half;
  fill_cos_sin(cs, args, positions[t], args.dynamic_factor > 0.f ? row_len[t] : 0);
  __syncthreads();
  bf16* row = x + t * H * Dh;
  for (int64_t j = threadIdx.x; j < H * half; j += blockDim.x) {
    const int64_t h = j / half;
    const int i = int(j - h * half);
    bf16* head = row + h * Dh;
    const float x1 = __bfloat162float(head[i]), x2 = __bfloat162float(head[i + half]);
    head[i] = __float2bfloat16_rn(x1 * cs[i] - x2 * cs[half + i]);
    head[i + half] = __float2bfloat16_rn(x2 * cs[i] + x1 * cs[half + i]);
  }
}

// Where qkv_cache_kernel reads and writes: qkv [T, (Hq + 2·Hkv)·Dh] in, q [T, Hq, Dh] and
// the cache [slots, Hkv, Dh] out (bf16, or e4m3 bytes when cache_f8); norms [Dh] (null:
// none), bf16 or f32.
struct QkvArgs {
  bf16* q;
  void* k_cache;
  void* v_cache;
  bool cache_f8;
  const bf16* qkv;
  const int32_t* positions;
  const int32_t* row_len;  // only read when dynamic
  const int32_t* slot_map;
  int64_t num_slots;
  int Hq, Hkv, Dh;
  const void* q_norm;
  const void* k_norm;
  bool norm_f32;
  float eps, offset;
};

__device__ __forceinline__ float norm_weight(const void* w, bool f32, int d) {
  return f32 ? static_cast<const float*>(w)[d] : __bfloat162float(static_cast<const bf16*>(w)[d]);
}

// Both qkv_to_cache kernels' start: token t's angles into cs ([cos | sin]) and its KV
// slot. Positions and slots are the step's metadata, which no kernel of the step writes,
// so the angles are computed before the wait for the qkv linear; row_len (dynamic NTK)
// is a kernel's. Ends with a block barrier.
__device__ __forceinline__ int64_t begin_token(float* cs, const QkvArgs& a, const RopeArgs& args,
                                               int64_t t) {
  cuda::pdl_launch_next();
  const bool dynamic = args.dynamic_factor > 0.f;
  if (dynamic) cuda::pdl_wait();
  fill_cos_sin(cs, args, a.positions[t], dynamic ? a.row_len[t] : 0);
  const int64_t slot = a.slot_map[t];
  if (!dynamic) cuda::pdl_wait();
  __syncthreads();
  return slot;
}

// Block (t, y): token t, heads [y·W, y·W + W) of its Hq + 2·Hkv (W warps, one head
// each, so a one-token step still spreads over many SMs). A warp loads its head into
// shared memory (f32), applies the optional RMSNorm (rounded to bf16, as the separate op
// stores it), then RoPE for q and k heads; q heads go to q, k and v heads to the token's
// slot (none when it is negative).
//   dynamic shared memory: [cos | sin] (2·half floats), then Dh floats per warp
__global__ void qkv_cache_kernel(const QkvArgs a, const RopeArgs args) {
  extern __shared__ float smem[];
  float* cs = smem;
  const int64_t t = blockIdx.x;
  const int half = args.half;
  const int64_t slot = begin_token(cs, a, args, t);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int num_warps = int(blockDim.x) / 32, Dh = a.Dh;
  float* buf = smem + 2 * half + warp * Dh;
  const bool has_slot = slot >= 0 && slot < a.num_slots;
  const bf16* row = a.qkv + t * int64_t(a.Hq + 2 * a.Hkv) * Dh;
  const int last = min(a.Hq + 2 * a.Hkv, int(blockIdx.y + 1) * num_warps);
  for (int h = int(blockIdx.y) * num_warps + warp; h < last; h += num_warps) {  // one pass
    const bool is_q = h < a.Hq, is_v = h >= a.Hq + a.Hkv;
    int64_t dst_off;  // elements into q or the cache
    void* dst_base;
    if (is_q) {
      dst_base = a.q;
      dst_off = (t * a.Hq + h) * Dh;
    } else {
      if (!has_slot) continue;  // the whole warp skips together
      const int kvh = is_v ? h - a.Hq - a.Hkv : h - a.Hq;
      dst_base = is_v ? a.v_cache : a.k_cache;
      dst_off = (slot * a.Hkv + kvh) * Dh;
    }
    const bool f8 = a.cache_f8 && !is_q;
    // Element d of the head: bf16, narrowed to e4m3 for an e4m3 cache.
    const auto put = [&](int d, float x) {
      const bf16 b = __float2bfloat16_rn(x);
      if (f8)
        static_cast<uint8_t*>(dst_base)[dst_off + d] = cuda::f8_from_bf16(b);
      else
        static_cast<bf16*>(dst_base)[dst_off + d] = b;
    };
    const bf16* src = row + int64_t(h) * Dh;
    float sum_sq = 0.f;
    for (int d = lane; d < Dh; d += 32) {
      const float x = __bfloat162float(src[d]);
      buf[d] = x;
      sum_sq += x * x;
    }
    const void* w = is_v ? nullptr : (is_q ? a.q_norm : a.k_norm);
    if (w) {
      const float r = 1.f / sqrtf(cuda::warp_sum(sum_sq) / float(Dh) + a.eps);
      for (int d = lane; d < Dh; d += 32)
        buf[d] = __bfloat162float(
            __float2bfloat16_rn((buf[d] * r) * (norm_weight(w, a.norm_f32, d) + a.offset)));
    }
    __syncwarp();
    const int rotated = is_v ? 0 : half;
    for (int i = lane; i < rotated; i += 32) {
      const float x1 = buf[i], x2 = buf[i + half];
      put(i, x1 * cs[i] - x2 * cs[half + i]);
      put(i + half, x2 * cs[i] + x1 * cs[half + i]);
    }
    for (int d = 2 * rotated + lane; d < Dh; d += 32) put(d, buf[d]);
    __syncwarp();
  }
}

// The same op for the common shapes (head dim 64, 128 or 256, rotary_dim a multiple of
// 16, 16-byte aligned tensors), at the speed of its bytes: a head is Dh / 8 lanes holding
// 8 consecutive elements each (one 16-byte load, one 16- or 8-byte store), so a warp takes
// 32 / (Dh / 8) heads at once; the norm's sum of squares is a shuffle reduction inside
// the head's lanes, and RoPE's partner elements (i and i + half) sit half / 8 lanes apart,
// exchanged as packed bf16 pairs (every value is bf16 by then: the raw projection, or
// the norm's bf16 rounding). The one-warp-per-head kernel above moved these bytes 2 at a
// time and, at a prefill step of 8,192 tokens, ran ~5x longer than its bytes' HBM time.
// Block (t, y): token t, heads [y·H, y·H + H) with H = 8 warps' worth.
template <int DH>
__global__ void __launch_bounds__(256) qkv_cache_vec_kernel(const QkvArgs a, const RopeArgs args) {
  constexpr int kLanes = DH / 8;  // lanes per head
  constexpr int kHeadsPerWarp = 32 / kLanes;
  __shared__ float cs[2 * kMaxHalf];
  const int64_t t = blockIdx.x;
  const int half = args.half;
  const int64_t slot = begin_token(cs, a, args, t);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int l = lane % kLanes, heads = a.Hq + 2 * a.Hkv;
  const int h = (int(blockIdx.y) * 8 + warp) * kHeadsPerWarp + lane / kLanes;
  const bool valid = h < heads;
  const bool is_q = h < a.Hq, is_v = h >= a.Hq + a.Hkv;
  const int d0 = 8 * l;
  // Load the lane's 8 elements (zeros past the last head: every lane takes part in the
  // shuffles below).
  float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (valid) cuda::load_pack(a.qkv + (t * heads + h) * int64_t(DH) + d0, x);
  const void* w = is_v ? nullptr : (is_q ? a.q_norm : a.k_norm);
  if (a.q_norm != nullptr) {  // uniform: both norms or none; v heads reduce and ignore it
    float sum_sq = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) sum_sq += x[j] * x[j];
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, o);
    if (w != nullptr) {
      const float r = 1.f / sqrtf(sum_sq / float(DH) + a.eps);
#pragma unroll
      for (int j = 0; j < 8; j++)
        x[j] = __bfloat162float(
            __float2bfloat16_rn((x[j] * r) * (norm_weight(w, a.norm_f32, d0 + j) + a.offset)));
    }
  }
  // RoPE: the partner of element e < half is e + half, half / 8 lanes up; of e in
  // [half, 2·half), e - half, half / 8 lanes down. Values travel as bf16 pairs (exact).
  const int shift = half / 8;
  uint32_t mine[4], other[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x[2 * j], x[2 * j + 1]);
    mine[j] = *reinterpret_cast<const uint32_t*>(&v);
  }
  const bool low = l < shift, rotated = !is_v && l < 2 * shift;
  const int src = low ? lane + shift : lane - shift;
#pragma unroll
  for (int j = 0; j < 4; j++) other[j] = __shfl_sync(0xffffffffu, mine[j], src & 31);
  float y[8];
#pragma unroll
  for (int j = 0; j < 8; j++) {
    const float p = __bfloat162float(reinterpret_cast<const bf16*>(other)[j]);
    if (!rotated) {
      y[j] = x[j];
    } else if (low) {
      const int i = d0 + j;
      y[j] = x[j] * cs[i] - p * cs[half + i];
    } else {
      const int i = d0 + j - half;
      y[j] = x[j] * cs[i] + p * cs[half + i];
    }
  }
  if (!valid) return;
  if (is_q) {
    cuda::store_pack(a.q + (t * a.Hq + h) * int64_t(DH) + d0, y);
    return;
  }
  if (slot < 0 || slot >= a.num_slots) return;
  const int kvh = is_v ? h - a.Hq - a.Hkv : h - a.Hq;
  const int64_t off = (slot * a.Hkv + kvh) * int64_t(DH) + d0;
  void* base = is_v ? a.v_cache : a.k_cache;
  if (a.cache_f8) {
    uint32_t q[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 8; j++)
      q[j / 4] |= uint32_t(cuda::f8_from_bf16(__float2bfloat16_rn(y[j]))) << (8 * (j % 4));
    *reinterpret_cast<uint2*>(static_cast<uint8_t*>(base) + off) = make_uint2(q[0], q[1]);
  } else {
    cuda::store_pack(static_cast<bf16*>(base) + off, y);
  }
}

// ---------------------------------------------------------------- launch helpers

void check_rope_spec(const RopeSpec& spec, int64_t head_dim) {
  TANDEM_CUDA_REQUIRE(spec.rotary_dim > 0 && spec.rotary_dim % 2 == 0 &&
                          spec.rotary_dim <= head_dim && spec.rotary_dim / 2 <= kMaxHalf,
                      "rope: rotary_dim " + std::to_string(spec.rotary_dim) +
                          " must be even and in (0, min(head_dim " + std::to_string(head_dim) +
                          ", " + std::to_string(2 * kMaxHalf) + ")]");
  TANDEM_CUDA_REQUIRE(int(spec.inv_freq.size()) == spec.rotary_dim / 2,
                      "rope: inv_freq has " + std::to_string(spec.inv_freq.size()) +
                          " entries, rotary_dim " + std::to_string(spec.rotary_dim) + " needs " +
                          std::to_string(spec.rotary_dim / 2));
  if (spec.dynamic_factor > 0.f)
    TANDEM_CUDA_REQUIRE(spec.original_max_position > 0 && spec.rotary_dim > 2,
                        "rope: dynamic NTK needs original_max_position > 0 and rotary_dim > 2");
}

RopeArgs make_args(const RopeSpec& spec) {
  RopeArgs a{};
  a.half = spec.rotary_dim / 2;
  for (int i = 0; i < a.half; i++) a.inv_freq[i] = spec.inv_freq[size_t(i)];
  a.attention_factor = spec.attention_factor;
  a.dynamic_factor = spec.dynamic_factor;
  a.original_max_position = spec.original_max_position;
  a.base = spec.base;
  return a;
}

}  // namespace

// ---------------------------------------------------------------- launcher

// Rotates each head in place.   x [T, H, Dh], step.positions [T] i32
void CudaBackend::rope(Tensor& x, const StepTensors& step, const RopeSpec& spec) {
  cuda::check_tensor(x, DType::BF16, "rope", "x");
  TANDEM_CUDA_REQUIRE(x.ndim() == 3, "rope: x must be [T, H, Dh], got " + x.shape.str());
  cuda::check_tensor(step.positions, DType::I32, "rope", "step.positions");
  const int64_t T = x.dim(0), H = x.dim(1), Dh = x.dim(2);
  TANDEM_CUDA_REQUIRE(T == step.num_tokens && step.positions.numel() >= T,
                      "rope: x " + x.shape.str() + " vs step with " +
                          std::to_string(step.num_tokens) + " tokens, positions " +
                          step.positions.shape.str());
  check_rope_spec(spec, Dh);
  if (T == 0 || H == 0) return;
  const RopeArgs args = make_args(spec);
  Tensor row_len;
  if (spec.dynamic_factor > 0.f) {
    cuda::check_tensor(step.seq_starts, DType::I32, "rope", "step.seq_starts");
    TANDEM_CUDA_REQUIRE(step.num_rows > 0 && step.seq_starts.numel() >= step.num_rows + 1,
                        "rope: step has " + std::to_string(step.num_rows) +
                            " rows but seq_starts " + step.seq_starts.shape.str());
    row_len = alloc(DType::I32, {T});
    row_length_kernel<<<unsigned(step.num_rows), 256, 0, stream_>>>(
        row_len.ptr<int32_t>(), step.positions.ptr<int32_t>(), step.seq_starts.ptr<int32_t>());
    TANDEM_CUDA_LAUNCHED("row_length_kernel");
  }
  const int threads = int(std::min<int64_t>(256, std::max<int64_t>(32, H * args.half)));
  rope_kernel<<<unsigned(T), threads, 0, stream_>>>(
      x.ptr<bf16>(), step.positions.ptr<int32_t>(),
      row_len.defined() ? row_len.ptr<int32_t>() : nullptr, H, Dh, args);
  TANDEM_CUDA_LAUNCHED("rope_kernel");
}

// q, k, v from the fused projection to q and the cache, with the optional q/k norms and
// RoPE (Backend::qkv_to_cache).   q [T, Hq, Dh], qkv [T, (Hq + 2·Hkv)·Dh]
void CudaBackend::qkv_to_cache(Tensor& q, const Tensor& qkv, PagedKv& cache,
                               const StepTensors& step, const RopeSpec& spec,
                               const QkNorm& norm) {
  // A v norm (Gemma 3n/4) or a qkv without a v block (k_eq_v) is outside the fused
  // kernel: the composed ops do it.
  if (norm.v.defined() || (q.ndim() == 3 && qkv.ndim() == 2 && cache.k.ndim() == 4 &&
                           qkv.dim(1) == (q.dim(1) + cache.k.dim(2)) * q.dim(2)))
    return Backend::qkv_to_cache(q, qkv, cache, step, spec, norm);
  cuda::check_tensor(q, DType::BF16, "qkv_to_cache", "q");
  cuda::check_tensor(qkv, DType::BF16, "qkv_to_cache", "qkv");
  const bool f8 = cache.k.defined() && cache.k.dtype == DType::F8E4M3;
  const DType cache_dtype = f8 ? DType::F8E4M3 : DType::BF16;
  cuda::check_tensor(cache.k, cache_dtype, "qkv_to_cache", "cache.k");
  cuda::check_tensor(cache.v, cache_dtype, "qkv_to_cache", "cache.v");
  cuda::check_tensor(step.positions, DType::I32, "qkv_to_cache", "step.positions");
  const Tensor& slot_map = step.kv(cache).slot_map;
  cuda::check_tensor(slot_map, DType::I32, "qkv_to_cache", "slot_map");
  TANDEM_CUDA_REQUIRE(q.ndim() == 3 && qkv.ndim() == 2 && cache.k.ndim() == 4 &&
                          cache.v.shape == cache.k.shape,
                      "qkv_to_cache: q " + q.shape.str() + ", qkv " + qkv.shape.str() +
                          ", cache " + cache.k.shape.str());
  const int64_t T = q.dim(0), Hq = q.dim(1), Dh = q.dim(2), Hkv = cache.k.dim(2);
  TANDEM_CUDA_REQUIRE(qkv.dim(0) == T && qkv.dim(1) == (Hq + 2 * Hkv) * Dh &&
                          cache.k.dim(3) == Dh && T == step.num_tokens &&
                          step.positions.numel() >= T && slot_map.numel() >= T,
                      "qkv_to_cache: qkv " + qkv.shape.str() + " must be [T, (Hq + 2·Hkv)·Dh] for q " +
                          q.shape.str() + " and cache " + cache.k.shape.str() +
                          " over the step's tokens");
  check_rope_spec(spec, Dh);
  const bool has_norm = norm.q.defined();
  if (has_norm) {
    TANDEM_CUDA_REQUIRE(norm.k.defined() && norm.q.numel() == Dh && norm.k.numel() == Dh &&
                            norm.q.dtype == norm.k.dtype &&
                            (norm.q.dtype == DType::BF16 || norm.q.dtype == DType::F32) &&
                            norm.q.device == Device::CUDA && norm.k.device == Device::CUDA,
                        "qkv_to_cache: q and k norms must both be [Dh] bf16 or f32 on the GPU");
  }
  if (T == 0) return;
  const RopeArgs args = make_args(spec);
  Tensor row_len;
  if (spec.dynamic_factor > 0.f) {
    cuda::check_tensor(step.seq_starts, DType::I32, "qkv_to_cache", "step.seq_starts");
    TANDEM_CUDA_REQUIRE(step.num_rows > 0 && step.seq_starts.numel() >= step.num_rows + 1,
                        "qkv_to_cache: step rows vs seq_starts " + step.seq_starts.shape.str());
    row_len = alloc(DType::I32, {T});
    row_length_kernel<<<unsigned(step.num_rows), 256, 0, stream_>>>(
        row_len.ptr<int32_t>(), step.positions.ptr<int32_t>(), step.seq_starts.ptr<int32_t>());
    TANDEM_CUDA_LAUNCHED("row_length_kernel");
  }
  QkvArgs a{};
  a.q = q.ptr<bf16>();
  a.k_cache = cache.k.data;
  a.v_cache = cache.v.data;
  a.cache_f8 = f8;
  a.qkv = qkv.ptr<bf16>();
  a.positions = step.positions.ptr<int32_t>();
  a.row_len = row_len.defined() ? row_len.ptr<int32_t>() : nullptr;
  a.slot_map = slot_map.ptr<int32_t>();
  a.num_slots = cache.k.dim(0) * cache.k.dim(1);
  a.Hq = int(Hq);
  a.Hkv = int(Hkv);
  a.Dh = int(Dh);
  a.q_norm = has_norm ? norm.q.data : nullptr;
  a.k_norm = has_norm ? norm.k.data : nullptr;
  a.norm_f32 = has_norm && norm.q.dtype == DType::F32;
  a.eps = norm.eps;
  a.offset = norm.weight_offset;
  const int64_t heads = Hq + 2 * Hkv;
  // The vectorized kernel where it applies (2.4x the one-warp-per-head kernel on an
  // 8,192-token step, bench/RESULTS.md 2026-12-02 fourth session); that one for the rest.
  const bool vec = (Dh == 64 || Dh == 128 || Dh == 256) && spec.rotary_dim % 16 == 0 &&
                   cuda::aligned16(a.qkv) && cuda::aligned16(a.q) && cuda::aligned16(a.k_cache) &&
                   cuda::aligned16(a.v_cache);
  if (vec) {
    const int64_t per_block = 8 * (32 / (Dh / 8));  // 8 warps' heads
    const dim3 grid(unsigned(T), unsigned((heads + per_block - 1) / per_block));
    const auto kernel = Dh == 64 ? &qkv_cache_vec_kernel<64>
                        : Dh == 128 ? &qkv_cache_vec_kernel<128>
                                    : &qkv_cache_vec_kernel<256>;
    cuda::launch_pdl("qkv_cache_vec_kernel", kernel, grid, dim3(256), 0, stream_, a, args);
    return;
  }
  const int warps = int(std::min<int64_t>(4, heads));
  const size_t smem = size_t(2 * args.half + warps * Dh) * sizeof(float);
  TANDEM_CUDA_REQUIRE(smem <= 48 * 1024, "qkv_to_cache: head dim too large for one block");
  const dim3 grid(unsigned(T), unsigned((heads + warps - 1) / warps));
  cuda::launch_pdl("qkv_cache_kernel", &qkv_cache_kernel, grid, dim3(unsigned(32 * warps)), smem,
                   stream_, a, args);
}

}  // namespace tandem
