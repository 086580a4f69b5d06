// Paged attention on CUDA: write_kv stores the step's new K/V rows in their slots, and
// attention checks its arguments and dispatches to the tensor-core kernels:
//   - every row decodes one token (T == B): the decode kernel (flash-decoding, split
//     over the context) serves every token;
//   - otherwise (prefill or a mixed step): the decode kernel serves the rows with one
//     token and the prefill kernel (flash-attention-2) the rows with more.
// Which rows have how many tokens is read on the device; the host only sizes grids from
// T, B and the step's upper bounds, so a step can be captured in a CUDA graph and
// replayed with shorter rows. Flash-decoding splits merge inside the decode kernel, on
// arrival counters the backend keeps zeroed between launches (split_counters).
//
// The cache is bf16 or f8_e4m3 (--kv-cache-dtype fp8: half the bytes per token, and the
// decode kernel reads half as much); every kernel widens e4m3 to bf16 as it loads.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "backend/cuda/cuda_attention.cuh"
#include "backend/cuda/cuda_backend.h"

namespace tandem {

namespace {

using attn::bf16;

// The longest row a step may have for verify_decode_kernel to put it on the decode kernel.
constexpr int kVerifyRowTokens = 8;

// One 16-byte vector (8 bf16) per thread; blockIdx.y = 0 copies K, 1 copies V. Tokens
// whose slot is negative (padding in a replayed graph) or outside the pool are skipped.
__global__ void write_kv_kernel(bf16* k_cache, bf16* v_cache, const bf16* k, const bf16* v,
                                const int32_t* slot_map, int64_t num_vectors, int row_vectors,
                                int64_t num_slots) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_vectors) return;
  const int64_t t = i / row_vectors, c = i % row_vectors;
  const int64_t slot = slot_map[t];
  if (slot < 0 || slot >= num_slots) return;
  const uint4* src = reinterpret_cast<const uint4*>(blockIdx.y == 0 ? k : v);
  uint4* dst = reinterpret_cast<uint4*>(blockIdx.y == 0 ? k_cache : v_cache);
  dst[slot * row_vectors + c] = src[i];
}

// The e4m3 twin: each thread narrows 8 bf16 (16 bytes) to 8 cache bytes.
__global__ void write_kv_f8_kernel(uint8_t* k_cache, uint8_t* v_cache, const bf16* k, const bf16* v,
                                   const int32_t* slot_map, int64_t num_vectors, int row_vectors,
                                   int64_t num_slots) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_vectors) return;
  const int64_t t = i / row_vectors, c = i % row_vectors;
  const int64_t slot = slot_map[t];
  if (slot < 0 || slot >= num_slots) return;
  const uint4 in = reinterpret_cast<const uint4*>(blockIdx.y == 0 ? k : v)[i];
  const bf16* e = reinterpret_cast<const bf16*>(&in);
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < 8; j++) w[j / 4] |= uint32_t(cuda::f8_from_bf16(e[j])) << (8 * (j % 4));
  uint8_t* dst = blockIdx.y == 0 ? k_cache : v_cache;
  reinterpret_cast<uint2*>(dst)[slot * row_vectors + c] = make_uint2(w[0], w[1]);
}

bool aligned16(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
}

void require_bf16(const Tensor& t, const char* what) {
  if (!t.defined() || t.device != Device::CUDA || t.dtype != DType::BF16 || !aligned16(t))
    cuda_fail(std::string(what) + " must be a 16-byte aligned bf16 CUDA tensor");
}

void require_i32(const Tensor& t, int64_t min_elems, const char* what) {
  if (!t.defined() || t.device != Device::CUDA || t.dtype != DType::I32 || t.numel() < min_elems)
    cuda_fail(std::string(what) + " must be an i32 CUDA tensor of at least " +
              std::to_string(min_elems) + " elements, got " + t.shape.str());
}

// A bf16 or e4m3 cache (k and v alike); true for e4m3.
bool check_cache(const PagedKv& cache, const StepTensors& step, const char* op) {
  const bool f8 = cache.k.defined() && cache.k.dtype == DType::F8E4M3;
  for (const Tensor* t : {&cache.k, &cache.v})
    if (!t->defined() || t->device != Device::CUDA || !aligned16(*t) ||
        t->dtype != (f8 ? DType::F8E4M3 : DType::BF16))
      cuda_fail(std::string(op) + ": the cache must be 16-byte aligned bf16 or f8_e4m3 CUDA " +
                "tensors, k and v alike");
  const int align = f8 ? 16 : 8;  // a 16-byte copy holds whole elements of one head
  if (cache.k.ndim() != 4 || !(cache.v.shape == cache.k.shape) ||
      cache.k.dim(1) != step.block_size || cache.k.dim(3) % align != 0)
    cuda_fail(std::string(op) + ": cache k " + cache.k.shape.str() + " v " + cache.v.shape.str() +
              " must be [blocks, " + std::to_string(step.block_size) +
              ", Hkv, Dh] with Dh a multiple of " + std::to_string(align));
  return f8;
}

// The step arrays attention reads (the block table of the cache's KV group), and the
// AttnArgs fields that come from them.
attn::AttnArgs step_args(const StepTensors& step, const KvGroupTensors& kv) {
  const int T = step.num_tokens, B = step.num_rows;
  require_i32(step.positions, T, "attention: step.positions");
  require_i32(step.seq_starts, int64_t(B) + 1, "attention: step.seq_starts");
  require_i32(kv.block_table, int64_t(B) * kv.max_blocks, "attention: block_table");
  cuda_require(step.block_size > 0 && kv.max_blocks >= 0 && B >= 0,
               "attention: step.block_size must be positive");
  attn::AttnArgs a;
  a.positions = step.positions.ptr<int32_t>();
  a.seq_starts = step.seq_starts.ptr<int32_t>();
  a.block_table = kv.block_table.ptr<int32_t>();
  a.num_tokens = T;
  a.num_rows = B;
  a.max_blocks = kv.max_blocks;
  a.block_size = step.block_size;
  const bool pow2 = (step.block_size & (step.block_size - 1)) == 0;
  a.block_shift = pow2 ? __builtin_ctz(unsigned(step.block_size)) : -1;
  return a;
}

// Arrival counters per SM: splitting only pays below ~14 waves of items (above, one split
// fills >= 13/14 of the waves), i.e. items < 14 · ctas_per_sm · num_sms, and ctas_per_sm
// is 2-3 here; 64 per SM leaves room for any occupancy up to 4 (256 B per SM).
constexpr int64_t kSplitCountersPerSm = 64;

int64_t split_counter_capacity(const cudaDeviceProp& props) {
  return kSplitCountersPerSm * std::max(1, props.multiProcessorCount);
}

// The flash-decoding plan (cuda_split_plan.h) as the kernels' arguments.
attn::SplitArgs plan_splits(int64_t num_items, int max_keys, int num_sms, int ctas_per_sm,
                            int64_t max_split_items) {
  attn::SplitArgs sp;
  sp.num_splits = attn::plan_num_splits(num_items, max_keys, num_sms, ctas_per_sm, max_split_items);
  return sp;
}

}  // namespace

int* CudaBackend::split_counters() {
  return zeroed_counters(split_counters_, split_counter_capacity(props_),
                         "attention (split-merge counters)");
}

// Writes the step's new K and V into their slots.   k, v [T, Hkv, Dh]
void CudaBackend::write_kv(PagedKv& cache, const Tensor& k, const Tensor& v,
                           const StepTensors& step) {
  const bool f8 = check_cache(cache, step, "write_kv");
  require_bf16(k, "write_kv: k");
  require_bf16(v, "write_kv: v");
  const int64_t T = step.num_tokens, row = cache.k.dim(2) * cache.k.dim(3);
  const Tensor& slot_map = step.kv(cache).slot_map;
  require_i32(slot_map, T, "write_kv: slot_map");
  if (k.numel() != T * row || v.numel() != T * row)
    cuda_fail("write_kv: k " + k.shape.str() + " v " + v.shape.str() + " must hold " +
              std::to_string(T) + " rows of Hkv x Dh = " + std::to_string(row));
  if (T == 0) return;
  const int64_t num_vectors = T * (row / 8);
  const unsigned blocks = unsigned((num_vectors + 255) / 256);
  const int64_t num_slots = cache.k.dim(0) * cache.k.dim(1);
  if (f8)
    write_kv_f8_kernel<<<dim3(blocks, 2), 256, 0, stream_>>>(
        cache.k.ptr<uint8_t>(), cache.v.ptr<uint8_t>(), k.ptr<bf16>(), v.ptr<bf16>(),
        slot_map.ptr<int32_t>(), num_vectors, int(row / 8), num_slots);
  else
    write_kv_kernel<<<dim3(blocks, 2), 256, 0, stream_>>>(
        cache.k.ptr<bf16>(), cache.v.ptr<bf16>(), k.ptr<bf16>(), v.ptr<bf16>(),
        slot_map.ptr<int32_t>(), num_vectors, int(row / 8), num_slots);
  TANDEM_CUDA_LAUNCHED("write_kv kernel");
}

// Causal (optionally windowed, softcapped) GQA attention of each new token over its
// row's cached keys.   out, q [T, Hq, Dh]; cache [NB, BS, Hkv, Dh]
void CudaBackend::attention(Tensor& out, const Tensor& q, const PagedKv& cache,
                            const StepTensors& step, const AttentionParams& params) {
  require_bf16(q, "attention: q");
  require_bf16(out, "attention: out");
  const bool f8 = check_cache(cache, step, "attention");
  const int64_t Hkv = cache.k.dim(2), Dh = cache.k.dim(3);
  if (q.ndim() != 3 || q.dim(0) != step.num_tokens || q.dim(2) != Dh || !(out.shape == q.shape) ||
      out.data == q.data)
    cuda_fail("attention: q " + q.shape.str() + " and out " + out.shape.str() +
              " must be separate [" + std::to_string(step.num_tokens) + ", Hq, " +
              std::to_string(Dh) + "] tensors");
  const int64_t Hq = q.dim(1);
  cuda_require(Hkv > 0 && Hq % Hkv == 0, "attention: query heads must be a multiple of kv heads");
  cuda_require(Dh <= attn::kMaxHeadDim, "attention: head dim above 512");
  cuda_require(params.softcap >= 0.f && params.window >= 0,
               "attention: softcap and window must be >= 0");
  if (step.num_tokens == 0) return;

  attn::AttnArgs a = step_args(step, step.kv(cache));
  a.q = q.ptr<bf16>();
  a.k = cache.k.data;
  a.v = cache.v.data;
  a.kv_f8 = f8;
  a.out = out.ptr<bf16>();
  a.num_blocks = int(cache.k.dim(0));
  a.num_q_heads = int(Hq);
  a.num_kv_heads = int(Hkv);
  a.group = int(Hq / Hkv);
  a.head_dim = int(Dh);
  a.qk_mul = params.softcap > 0.f ? params.scale / params.softcap : params.scale * attn::kLog2e;
  a.cap_log2 = params.softcap > 0.f ? params.softcap * attn::kLog2e : 0.f;
  a.window = params.window;
  if (params.media_bidirectional && step.media_ends.defined()) {
    require_i32(step.media_ends, step.num_tokens, "attention: step.media_ends");
    a.media_ends = step.media_ends.ptr<int32_t>();
  }

  // Every token on the decode kernel: a decode step (T == B), or with verify_decode_kernel (on
  // unless a test turns it off) a step whose rows have at most kVerifyRowTokens tokens each
  // (a speculative verify step; the host knows its rows' longest, StepTensors::
  // max_row_tokens). Measured on an H100 (bench/RESULTS.md, 2026-12-06 fifth session), the
  // 8B shape, one row at ~256 keys: a step of 2 / 3 / 5 tokens 5.73 / 6.06 / 6.08 ms against
  // 6.20 / 6.53 / 6.47 on the prefill kernel (a 1-token step: 5.47).
  const bool all_decode = step.num_tokens == step.num_rows ||
                          (options_.verify_decode_kernel && step.max_row_tokens > 1 &&
                           step.max_row_tokens <= kVerifyRowTokens && a.media_ends == nullptr);
  const int num_x = all_decode ? step.num_tokens : step.num_rows;
  const int max_keys =
      params.window > 0 ? std::min(step.max_context_len, params.window) : step.max_context_len;
  const int heads_per_cta = attn::decode_heads_per_cta(f8);
  const int64_t items =
      int64_t(num_x) * a.num_kv_heads * ((a.group + heads_per_cta - 1) / heads_per_cta);
  attn::SplitArgs sp =
      plan_splits(items, max_keys, props_.multiProcessorCount,
                  attn::decode_ctas_per_sm(int(Dh), f8), split_counter_capacity(props_));
  sp.by_row = !all_decode;
  Tensor part_o, part_ml;  // split partials; back to the caching allocator after the launch
  if (sp.num_splits > 1) {
    const int64_t parts = int64_t(num_x) * Hq * sp.num_splits;
    part_o = alloc(DType::F32, {parts, Dh});
    part_ml = alloc(DType::F32, {parts, 2});
    sp.part_o = part_o.ptr<float>();
    sp.part_ml = reinterpret_cast<float2*>(part_ml.ptr<float>());
    sp.counters = split_counters();
  }
  attn::launch_decode(a, sp, num_x, stream_);
  if (!all_decode) attn::launch_prefill(a, props_, options_.sm90_prefill, stream_);
}

}  // namespace tandem
