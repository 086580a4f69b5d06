// Mixture of experts on CUDA: routing (softmax, top-k, optional renormalization) and the
// expert MLPs, all on the device and graph-capturable (no host sync, launch sizes from
// host shapes only):
//   1. route: one block counts the (token, j) pairs per expert, takes prefix sums and gives
//      every pair a "slot" in its expert's contiguous range;
//   2. gate_up: a grouped GEMM over (expert, 64-row tile) with the activation fused
//      (cuda_moe_gemm.cu) -> a [slots, F];
//   3. down: the same grouped GEMM -> y [slots, D];
//   4. combine: out[t] = Σ_j weights[t, j] · y[slot(t, j)], j in order, in f32.
// Slots within an expert are handed out by atomics, so their order varies, but a slot's
// values depend only on its token and expert, and the combine order is fixed: the result
// is deterministic. A pair whose expert id is outside [0, E) contributes nothing (the CPU
// twin throws; a kernel cannot).
// FP8 (e4m3) experts run the same steps in the FP8 linears' W8A8 arithmetic, as the CPU
// twin does: with dynamic input scales, x is quantized once per token before gate_up and
// a once per slot before down (launch_quantize_rows, the dense FP8 linears' kernel), and
// the grouped GEMMs read the e4m3 rows; with a static scale (one per expert) the GEMMs
// quantize the rows they load themselves.
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_linear_fp8.cuh"
#include "backend/cuda/cuda_moe_gemm.h"
#include "backend/gguf_tiles.h"

namespace tandem {

namespace {

using cuda::bf16;

constexpr int kMaxExperts = 4096;  // the routing block keeps 2 ints per expert in shared memory

// ---------------------------------------------------------------- kernels

// Which of two (logit, id) candidates ranks higher: larger logit, then lower id; id < 0 is
// "no candidate".
__device__ __forceinline__ bool ranks_higher(float v, int id, float best_v, int best_id) {
  if (id < 0) return false;
  if (best_id < 0) return true;
  return v > best_v || (v == best_v && id < best_id);
}

// One warp per row: softmax over E, the k most probable experts (largest first, ties to
// the lower id; softmax is monotonic, so they are ranked by logit), renormalized on demand.
// Pick j takes the best candidate ranked strictly below pick j - 1, so no "taken" marks.
//   weights [R, k] f32, ids [R, k] i32, logits [R, E]
template <typename T>
__global__ void topk_route_kernel(float* __restrict__ weights, int32_t* __restrict__ ids,
                                  const T* __restrict__ logits, int64_t R, int E, int k,
                                  bool renormalize) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= R) return;  // the whole warp leaves together
  const int lane = int(threadIdx.x & 31);
  const T* l = logits + row * E;
  float m = -INFINITY;
  for (int e = lane; e < E; e += 32) m = fmaxf(m, cuda::to_f32(l[e]));
  m = cuda::warp_max(m);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += expf(cuda::to_f32(l[e]) - m);
  sum = cuda::warp_sum(sum);
  float prev_v = INFINITY, kept = 0.f;
  int prev_id = -1;
  for (int j = 0; j < k; j++) {
    float best_v = 0.f;
    int best_id = -1;
    for (int e = lane; e < E; e += 32) {
      const float v = cuda::to_f32(l[e]);
      const bool below_prev = v < prev_v || (v == prev_v && e > prev_id);
      if (below_prev && ranks_higher(v, e, best_v, best_id)) {
        best_v = v;
        best_id = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best_v, o);
      const int oid = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (ranks_higher(ov, oid, best_v, best_id)) {
        best_v = ov;
        best_id = oid;
      }
    }
    const float p = expf(best_v - m) / sum;
    if (lane == 0) {
      weights[row * k + j] = p;
      ids[row * k + j] = best_id;
    }
    kept += p;
    prev_v = best_v;
    prev_id = best_id;
  }
  if (renormalize && lane == 0)
    for (int j = 0; j < k; j++) weights[row * k + j] /= kept;
}

// One block: slot ranges per expert and the slot of every (token, j) pair.
//   ids [P = T*k], offsets [E+1], tile_offsets [E+1] (tiles of kMoeTileRows),
//   token [P] (token of each slot; slots past the valid pairs stay unwritten),
//   slot_of_pair [P] (-1 for an invalid expert id). Shared memory: 2E ints.
__global__ void moe_route_kernel(const int32_t* __restrict__ ids, int64_t P, int k, int E,
                                 int32_t* __restrict__ offsets, int32_t* __restrict__ tile_offsets,
                                 int32_t* __restrict__ token, int32_t* __restrict__ slot_of_pair) {
  extern __shared__ int32_t shared[];
  int32_t* count = shared;       // [E]
  int32_t* cursor = shared + E;  // [E]
  for (int e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    const int32_t e = ids[p];
    if (e >= 0 && e < E) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t slots = 0, tiles = 0;
    for (int e = 0; e < E; e++) {
      offsets[e] = slots;
      tile_offsets[e] = tiles;
      cursor[e] = slots;
      slots += count[e];
      tiles += (count[e] + cuda::kMoeTileRows - 1) / cuda::kMoeTileRows;
    }
    offsets[E] = slots;
    tile_offsets[E] = tiles;
  }
  __syncthreads();
  for (int64_t p = threadIdx.x; p < P; p += blockDim.x) {
    const int32_t e = ids[p];
    if (e >= 0 && e < E) {
      const int32_t s = atomicAdd(&cursor[e], 1);
      token[s] = int32_t(p / k);
      slot_of_pair[p] = s;
    } else {
      slot_of_pair[p] = -1;
    }
  }
}

// out[t, d] = Σ_j weights[t, j] · y[slot_of_pair[t, j], d], in j order, f32.
//   out [T, D], y [slots, D], weights [T, k], slot_of_pair [T, k]. One block per token.
template <int N, bool kVec>
__global__ void moe_combine_kernel(bf16* __restrict__ out, const bf16* __restrict__ y,
                                   const float* __restrict__ weights,
                                   const int32_t* __restrict__ slot_of_pair, int64_t D, int k) {
  const int64_t t = blockIdx.x;
  for (int64_t d = int64_t(threadIdx.x) * N; d < D; d += int64_t(blockDim.x) * N) {
    float acc[N] = {};
    for (int j = 0; j < k; j++) {
      const int32_t s = slot_of_pair[t * k + j];
      if (s < 0) continue;
      const float w = weights[t * k + j];
      float v[N];
      cuda::load_n<N, kVec>(y + int64_t(s) * D + d, v);
#pragma unroll
      for (int i = 0; i < N; i++) acc[i] += w * v[i];
    }
    cuda::store_n<N, kVec>(out + t * D + d, acc);
  }
}

// ---------------------------------------------------------------- launch helpers

// The experts' weights are `weight_dtype`: bf16, or F8E4M3 for FP8 experts.
// weight_dtype: what gate_up and down must be; a ggml block type asks only that each be one
// (they may differ: llama.cpp's Q4_K_M keeps down in Q6_K) with rows of whole blocks.
void check_moe_shapes(const Tensor& out, const Tensor& x, const Tensor& weights, const Tensor& ids,
                      const Tensor& gate_up, const Tensor& down, DType weight_dtype) {
  const char* op = "moe_experts";
  cuda::check_tensor(out, DType::BF16, op, "out");
  cuda::check_tensor(x, DType::BF16, op, "x");
  cuda::check_tensor(weights, DType::F32, op, "weights");
  cuda::check_tensor(ids, DType::I32, op, "ids");
  if (dtype_is_block(weight_dtype)) {
    for (const Tensor* t : {&gate_up, &down}) {
      cuda::check_on_device(*t, op, t == &gate_up ? "gate_up" : "down");
      TANDEM_CUDA_REQUIRE(dtype_is_block(t->dtype) && t->ndim() == 3 &&
                              t->dim(2) % dtype_block(t->dtype).elems == 0,
                          std::string("moe_experts: ") + (t == &gate_up ? "gate_up " : "down ") +
                              t->shape.str() + " of " + std::string(dtype_name(t->dtype)) +
                              " must be a block type with rows of whole blocks");
    }
  } else {
    cuda::check_tensor(gate_up, weight_dtype, op, "gate_up");
    cuda::check_tensor(down, weight_dtype, op, "down");
  }
  TANDEM_CUDA_REQUIRE(gate_up.ndim() == 3 && down.ndim() == 3,
                      "moe_experts: gate_up " + gate_up.shape.str() + " and down " +
                          down.shape.str() + " must be 3-d");
  const int64_t T = x.rows(), D = x.cols(), E = gate_up.dim(0), F = gate_up.dim(1) / 2;
  TANDEM_CUDA_REQUIRE(F > 0 && D > 0 && gate_up.dim(1) == 2 * F && gate_up.dim(2) == D,
                      "moe_experts: gate_up " + gate_up.shape.str() + " must be [E, 2F, " +
                          std::to_string(D) + "]");
  TANDEM_CUDA_REQUIRE(down.dim(0) == E && down.dim(1) == D && down.dim(2) == F,
                      "moe_experts: down " + down.shape.str() + " must be [" + std::to_string(E) +
                          ", " + std::to_string(D) + ", " + std::to_string(F) + "]");
  TANDEM_CUDA_REQUIRE(E >= 1 && E <= kMaxExperts, "moe_experts: " + std::to_string(E) +
                                                      " experts (at most " +
                                                      std::to_string(kMaxExperts) + ")");
  TANDEM_CUDA_REQUIRE(out.rows() == T && out.cols() == D && out.data != x.data,
                      "moe_experts: out " + out.shape.str() + " must be a separate [" +
                          std::to_string(T) + ", " + std::to_string(D) + "] tensor");
  const int64_t k = T > 0 ? ids.numel() / T : 0;
  TANDEM_CUDA_REQUIRE(ids.numel() == T * k && weights.numel() == T * k,
                      "moe_experts: ids " + ids.shape.str() + " and weights " +
                          weights.shape.str() + " must both be [" + std::to_string(T) + ", k]");
}

// FP8 expert stack `name` (its weight's shape already checked: [E, N, K]) as the expert
// GEMMs take it, once its scales are checked against linear.h's layout: weight_scale [E, 1]
// / [E, N] / [E, ⌈N / block_n⌉, ⌈K / block_k⌉], input_scale [E, 1] with static inputs.
cuda::Fp8ExpertWeights fp8_experts_of(const Linear& l, const std::string& name) {
  const char* op = "moe_experts";
  const LinearQuant& q = *l.quant;
  const int64_t E = l.weight.dim(0), N = l.weight.dim(1), K = l.weight.dim(2);
  const bool block = q.granularity == ScaleGranularity::Block;
  cuda::check_tensor(q.weight_scale, DType::F32, op, (name + " weight_scale").c_str());
  // The GEMMs sum one K step of 32 columns at a time and scale at block boundaries.
  TANDEM_CUDA_REQUIRE(!block || (q.block_n > 0 && q.block_k > 0 && q.block_k % cuda::kMoeTileK == 0),
                      "moe_experts: " + name + "'s FP8 blocks of " + std::to_string(q.block_n) +
                          "x" + std::to_string(q.block_k) + ": the CUDA expert GEMMs need block_k a "
                          "positive multiple of " + std::to_string(cuda::kMoeTileK));
  const Shape want = q.granularity == ScaleGranularity::PerTensor    ? Shape{E, 1}
                     : q.granularity == ScaleGranularity::PerChannel ? Shape{E, N}
                                                                     : Shape{E, cuda::ceil_div(N, q.block_n),
                                                                             cuda::ceil_div(K, q.block_k)};
  TANDEM_CUDA_REQUIRE(q.weight_scale.shape == want,
                      "moe_experts: " + name + " weight_scale " + q.weight_scale.shape.str() +
                          " must be " + want.str() + " for " + name + " " + l.weight.shape.str());
  TANDEM_CUDA_REQUIRE(q.input != InputScaling::None,
                      "moe_experts: " + name + ": FP8 experts need quantized inputs (W8A8)");
  if (q.input == InputScaling::Static) {
    cuda::check_tensor(q.input_scale, DType::F32, op, (name + " input_scale").c_str());
    TANDEM_CUDA_REQUIRE(q.input_scale.shape == (Shape{E, 1}),
                        "moe_experts: " + name + " input_scale " + q.input_scale.shape.str() +
                            " must be [" + std::to_string(E) + ", 1]");
  }
  cuda::Fp8ExpertWeights w;
  w.w = l.weight.ptr<uint8_t>();
  w.scales = cuda::weight_scales(q, K);
  w.scales_per_expert = want.numel() / E;
  w.block_k = block ? q.block_k : 0;
  return w;
}

// An FP8 expert GEMM's input made of the bf16 rows x [R, K] (cuda::Fp8ExpertInput), and the
// buffers it points into (held until the GEMM is launched; stream order does the rest).
struct Fp8Rows {
  Tensor q, scales;
  cuda::Fp8ExpertInput in;
};

// Static input scale: the rows as they are (the GEMM quantizes them by each expert's
// scale). Dynamic: their e4m3 copy and scales, per row and group of block_k columns (block
// weights) or of all K, made once here for every expert that reads a row. (Where some
// expert ids lie outside [0, E), the last rows of `a` are never written; they are
// quantized all the same, and no GEMM reads them.)
Fp8Rows fp8_rows(CudaBackend& be, const bf16* x, int64_t R, int64_t K, const Linear& l) {
  const LinearQuant& q = *l.quant;
  Fp8Rows r;
  if (q.input == InputScaling::Static) {
    r.in.x = x;
    r.in.input_scale = q.input_scale.ptr<float>();
    return r;
  }
  const int64_t group = q.granularity == ScaleGranularity::Block ? q.block_k : K;
  r.q = be.alloc(DType::F8E4M3, {R, K});
  r.scales = be.alloc(DType::F32, {R, cuda::ceil_div(K, group)});
  cuda::launch_quantize_rows(be.stream(), r.q.ptr<uint8_t>(), r.scales.ptr<float>(), x, R, K, group,
                             nullptr);
  r.in.q = r.q.ptr<uint8_t>();
  r.in.scales = r.scales.ptr<float>();
  return r;
}

}  // namespace

// ---------------------------------------------------------------- launchers

//   weights [T, k] f32, ids [T, k] i32, logits [T, E] (bf16 or f32)
void CudaBackend::topk_route(Tensor& weights, Tensor& ids, const Tensor& logits, int k,
                             bool renormalize) {
  cuda::check_tensor(weights, DType::F32, "topk_route", "weights");
  cuda::check_tensor(ids, DType::I32, "topk_route", "ids");
  cuda::check_float(logits, "topk_route", "logits");
  const int64_t T = logits.rows(), E = logits.cols();
  TANDEM_CUDA_REQUIRE(k >= 1 && k <= E, "topk_route: k " + std::to_string(k) + " must be in [1, " +
                                            std::to_string(E) + "]");
  TANDEM_CUDA_REQUIRE(weights.numel() == T * k && ids.numel() == T * k,
                      "topk_route: weights " + weights.shape.str() + " and ids " + ids.shape.str() +
                          " must be [" + std::to_string(T) + ", " + std::to_string(k) + "]");
  if (T == 0) return;
  const int rows_per_block = 4;
  const unsigned grid = unsigned(cuda::ceil_div(T, rows_per_block));
  if (logits.dtype == DType::BF16)
    topk_route_kernel<<<grid, 32 * rows_per_block, 0, stream_>>>(
        weights.ptr<float>(), ids.ptr<int32_t>(), logits.ptr<bf16>(), T, int(E), k, renormalize);
  else
    topk_route_kernel<<<grid, 32 * rows_per_block, 0, stream_>>>(
        weights.ptr<float>(), ids.ptr<int32_t>(), logits.ptr<float>(), T, int(E), k, renormalize);
  TANDEM_CUDA_LAUNCHED("topk_route_kernel");
}

// out[t] = Σ_j weights[t, j] · down_e(act(gate_e x) * up_e x), e = ids[t, j].
//   out, x [T, D], gate_up [E, 2F, D], down [E, D, F]: bf16, ggml block types (each its own,
//   rows of whole blocks: each weight tile decoded to bf16 in shared memory), or e4m3 with their scales
//   (each projection its own layout, linear.h)
void CudaBackend::moe_experts(Tensor& out, const Tensor& x, const Tensor& weights,
                              const Tensor& ids, const Linear& gate_up_linear,
                              const Linear& down_linear, Activation act) {
  const bool fp8 = bool(gate_up_linear.quant);
  TANDEM_CUDA_REQUIRE(fp8 == bool(down_linear.quant),
                      "moe_experts: gate_up and down must both be FP8 or both not");
  const Tensor& gate_up = gate_up_linear.weight;
  const Tensor& down = down_linear.weight;
  const bool block = !fp8 && gate_up.defined() && dtype_is_block(gate_up.dtype);
  check_moe_shapes(out, x, weights, ids, gate_up, down,
                   fp8 ? DType::F8E4M3 : block ? gate_up.dtype : DType::BF16);
  cuda::Fp8ExpertWeights gate_up_fp8, down_fp8;
  if (fp8) {
    gate_up_fp8 = fp8_experts_of(gate_up_linear, "gate_up");
    down_fp8 = fp8_experts_of(down_linear, "down");
  }
  const int64_t T = x.rows(), D = x.cols(), E = gate_up.dim(0), F = gate_up.dim(1) / 2;
  if (T == 0) return;
  const int64_t k = ids.numel() / T, P = T * k;
  TANDEM_CUDA_REQUIRE(P < (int64_t(1) << 31), "moe_experts: too many (token, expert) pairs");
  Tensor offsets = alloc(DType::I32, {E + 1}), tile_offsets = alloc(DType::I32, {E + 1});
  Tensor token = alloc(DType::I32, {P}), slot_of_pair = alloc(DType::I32, {P});
  Tensor a = alloc(DType::BF16, {P, F}), y = alloc(DType::BF16, {P, D});

  moe_route_kernel<<<1, 1024, size_t(2 * E) * sizeof(int32_t), stream_>>>(
      ids.ptr<int32_t>(), P, int(k), int(E), offsets.ptr<int32_t>(), tile_offsets.ptr<int32_t>(),
      token.ptr<int32_t>(), slot_of_pair.ptr<int32_t>());
  TANDEM_CUDA_LAUNCHED("moe_route_kernel");

  // Σ_e ceil(count_e / 64) <= P (every tile holds a pair) and <= P / 64 + (experts with pairs).
  const int64_t max_tiles = std::min(P, cuda::ceil_div(P, cuda::kMoeTileRows) + std::min(E, P));
  const cuda::ExpertRows rows{offsets.ptr<int32_t>(), tile_offsets.ptr<int32_t>(), int(E),
                              max_tiles};
  if (fp8) {
    // The tensor-core kernels (TANDEM_FP8_MOE_TC) or the bf16-widening reference.
    const bool tc = options_.fp8_moe_tc;
    const Fp8Rows xq = fp8_rows(*this, x.ptr<bf16>(), T, D, gate_up_linear);
    (tc ? cuda::launch_moe_gate_up_fp8_tc : cuda::launch_moe_gate_up_fp8)(
        stream_, a.ptr<bf16>(), xq.in, token.ptr<int32_t>(), gate_up_fp8, rows, D, F, act);
    const Fp8Rows aq = fp8_rows(*this, a.ptr<bf16>(), P, F, down_linear);
    (tc ? cuda::launch_moe_down_fp8_tc : cuda::launch_moe_down_fp8)(stream_, y.ptr<bf16>(), aq.in,
                                                                    down_fp8, rows, D, F);
  } else if (block) {
    TANDEM_CUDA_REQUIRE(cuda::aligned16(x.data), "moe_experts: x must be 16-byte aligned");
    // Each projection on the shared-memory tiles (gguf_moe_tiles(), on unless
    // TANDEM_GGUF_MOE_TILES=0; on an H100 2.6-3.6x the wmma kernels at one token, 1.15-1.6x
    // at 8-256, the same outputs in cuda_gguf_bench) where they fit. They take every block
    // type, shape, activation and routing the wmma kernels do; only the wmma kernels take a
    // device whose shared memory a block is under the type's tiles (160-204 KiB: sm_90 and
    // sm_100 hold 227 KiB, sm_120 99) and stacked experts not 16-byte aligned (the tiles'
    // cp.async; the backend's allocations always are). The wmma kernels stay for those
    // cases, and as the switch's fallback.
    const size_t optin = props().sharedMemPerBlockOptin;
    const bool tiles = gguf_moe_tiles() && cuda::aligned16(a.data);
    const cuda::BlockExperts gu{gate_up.ptr<uint8_t>(), gate_up.dtype};
    const cuda::BlockExperts dn{down.ptr<uint8_t>(), down.dtype};
    (tiles && cuda::moe_block_tiles_fit(gu.dtype, gu.w, optin)
         ? cuda::launch_moe_gate_up_block_tiles
         : cuda::launch_moe_gate_up_block)(stream_, a.ptr<bf16>(), x.ptr<bf16>(),
                                           token.ptr<int32_t>(), gu, rows, D, F, act);
    (tiles && cuda::moe_block_tiles_fit(dn.dtype, dn.w, optin)
         ? cuda::launch_moe_down_block_tiles
         : cuda::launch_moe_down_block)(stream_, y.ptr<bf16>(), a.ptr<bf16>(), dn, rows, D, F);
  } else {
    cuda::launch_moe_gate_up(stream_, a.ptr<bf16>(), x.ptr<bf16>(), token.ptr<int32_t>(),
                             gate_up.ptr<bf16>(), rows, D, F, act);
    cuda::launch_moe_down(stream_, y.ptr<bf16>(), a.ptr<bf16>(), down.ptr<bf16>(), rows, D, F);
  }

  const int threads = int(std::min<int64_t>(256, std::max<int64_t>(32, D / 8)));
  if (D % 8 == 0 && cuda::aligned16(out.data) && cuda::aligned16(y.data))
    moe_combine_kernel<8, true>
        <<<unsigned(T), threads, 0, stream_>>>(out.ptr<bf16>(), y.ptr<bf16>(), weights.ptr<float>(),
                                               slot_of_pair.ptr<int32_t>(), D, int(k));
  else
    moe_combine_kernel<1, false>
        <<<unsigned(T), threads, 0, stream_>>>(out.ptr<bf16>(), y.ptr<bf16>(), weights.ptr<float>(),
                                               slot_of_pair.ptr<int32_t>(), D, int(k));
  TANDEM_CUDA_LAUNCHED("moe_combine_kernel");
}

}  // namespace tandem
