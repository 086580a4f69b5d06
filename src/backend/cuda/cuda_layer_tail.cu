// A dense decoder layer's tail as one kernel for a decode step of one or two rows with FP8
// weights (Backend::layer_tail): from the attention heads through the output projection,
// the residual adds, the FFN norm, gate|up, the gated activation and down, to the next
// layer's norm and q|k|v projection. The kernel chain it replaces runs eight kernels a
// layer for this (the o, gate|up, down and q|k|v weight streams, two add_rms_norms, the
// activation), and at each of their boundaries the next stream's CTAs can only start
// copying weights once the last stream's CTAs have left their SMs: HBM idles while
// the small kernels between the streams run, and every stream pays its ramp-up and its
// tail again (bench/RESULTS.md: 19 of 90 µs a layer on the small kernels, the four
// streams at 55-80% of HBM bandwidth).
//
// Here one CTA per SM runs the four weights through one ring (cuda_weight_stream.cuh):
// the producer warp copies o's rows, then gate|up's, down's and q|k|v's without ever
// waiting for the arithmetic, so HBM streams from the first weight byte of the layer to
// the last. The consumer warps go phase by phase, the phases separated by grid-wide
// barriers (all CTAs are resident: one per SM):
//   1. x1 = heads quantized; o_out = x1 · Woᵀ                       (o's rows of the CTA)
//   2. h = rms_norm(bf16(x + o_out)), quantized; gu = h · Wguᵀ     (every CTA the whole h)
//   3. a = bf16(act(gate) · up), quantized; x = bf16(bf16(x + o_out) + bf16(a · Wdᵀ))
//   4. h = rms_norm(x) with the next layer's weight, quantized; qkv = h · Wqkvᵀ
// (phase 4 only where the next layer exists). Every CTA computes the norm and the
// activation over the whole row itself (8-57 KB from L2) instead of waiting for a kernel
// that would. The arithmetic is the chain's, op for op: the same bf16 roundings, the norm's
// sums in the order of the 512-thread norm kernel (cuda_norm.cu, rows of 4096 and more),
// each stream's quantization and sums (cuda_fp8_stream.cuh); so at the 8B shape the tail
// gives the chain's bits.
//
// Values written inside the kernel by other CTAs (o_out, gu, x) are read through L2
// (ld.global.cg): an SM's L1 is not kept coherent with the others' writes.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_fp8.cuh"
#include "backend/cuda/cuda_fp8_stream.cuh"
#include "backend/cuda/cuda_weight_scales.h"

namespace tandem {

namespace {

using cuda::bf16;
using cuda::Fp8Ring;

constexpr int kConsumers = cuda::kStreamConsumers;
constexpr int kWarps = cuda::kStreamConsumerWarps;
constexpr int kMaxRows = cuda::kFp8MaxRows;  // the stream's mma columns

struct TailWeight {
  const uint8_t* w = nullptr;  // [N, K] e4m3
  cuda::WeightScales ws;       // per tensor or per channel
  const bf16* bias = nullptr;  // [N] or null
  int N = 0, K = 0;
};

struct TailParams {
  TailWeight o, gate_up, down, qkv;  // qkv.w null: the model's last layer
  const bf16* heads;                 // [M, o.K]
  bf16* x;                           // [M, D] the residual stream, in place
  const bf16* ffn_norm;              // [D]
  float ffn_eps, ffn_offset;
  const bf16* next_norm;  // [D], with qkv
  float next_eps, next_offset;
  bf16* o_out;    // [M, D] scratch
  bf16* gu;       // [M, 2F] scratch
  bf16* qkv_out;  // [M, qkv.N]
  unsigned* barrier;
  uint64_t* stamps;  // [grid][kStamps] or null (CudaBackend::set_layer_tail_stamps)
  int M;
};

// Where a CTA's time goes (a diagnostic): consumer thread 0 stamps the global timer after
// each step of the phases, the producer after issuing each weight's copies.
constexpr int kStamps = 16;
__device__ __forceinline__ void stamp(const TailParams& p, int k) {
  if (p.stamps == nullptr) return;
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  p.stamps[blockIdx.x * kStamps + k] = t;
}

__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

// All CTAs' consumers meet: what any of them wrote before is visible to all after. The
// counter's top bit flips once every CTA has arrived (CTA 0 adds 2^31 - (n - 1), the others
// 1), and the low bits return to what they were, so it needs no reset between barriers or
// launches.
__device__ __forceinline__ void grid_barrier(unsigned* counter) {
  consumers_sync();
  if (threadIdx.x == 0) {
    const unsigned add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    __threadfence();
    const unsigned old = atomicAdd(counter, add);
    unsigned now;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(counter) : "memory");
    } while (((now ^ old) & 0x80000000u) == 0);
    __threadfence();
  }
  consumers_sync();
}

// v[0, 8) = p[0, 8) through L2 (16-byte aligned).
__device__ __forceinline__ void load8_cg(const bf16* p, float (&v)[8]) {
  const uint4 u = __ldcg(reinterpret_cast<const uint4*>(p));
  const bf16* e = reinterpret_cast<const bf16*>(&u);
#pragma unroll
  for (int i = 0; i < 8; i++) v[i] = __bfloat162float(e[i]);
}

__device__ __forceinline__ float round_bf16(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

// A sum over the consumer threads, in block_reduce's order (cuda_device.cuh) for a block of
// 16 warps: each warp's butterfly, then one over the warps' sums.
__device__ __forceinline__ float consumers_sum(float v, float* scratch) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  v = cuda::warp_sum(v);
  consumers_sync();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  consumers_sync();
  v = lane < kWarps ? scratch[lane] : 0.f;
  return cuda::warp_sum(v);
}

// r[m] = 1 / rms(v) for each row m of v [M, D] from load(m, c, vals) (c % 8 == 0), as
// rms_norm_row (cuda_norm.cu) sums: thread t takes columns t·8, t·8 + 4096, ...
template <typename Load>
__device__ __forceinline__ void row_inv_rms(float* r, Load load, int M, int D, float eps,
                                            float* scratch) {
  const int tid = int(threadIdx.x);
  for (int m = 0; m < M; m++) {
    float sum_sq = 0.f;
    for (int c = tid * 8; c < D; c += kConsumers * 8) {
      float v[8];
      load(m, c, v);
#pragma unroll
      for (int i = 0; i < 8; i++) sum_sq += v[i] * v[i];
    }
    const float total = consumers_sum(sum_sq, scratch);
    if (tid == 0) r[m] = 1.f / sqrtf(total / float(D) + eps);
  }
  consumers_sync();
}

// The normed row's values as the norm kernel stores them (bf16) and the stream reads them.
__device__ __forceinline__ void normed8(const float (&v)[8], float r, const bf16* w, float offset,
                                        float (&out)[8]) {
  float wv[8];
  cuda::load_n<8, true>(w, wv);
#pragma unroll
  for (int i = 0; i < 8; i++) out[i] = round_bf16((v[i] * r) * (wv[i] + offset));
}

// Where a CTA's consumers stage x for the stream (shared memory).
struct Staging {
  uint8_t* xs;  // [M, K] e4m3
  double* sx;   // [M] x's scales
  float *sinv, *scratch, *rows;  // quantize_x's
  float *r, *sums;               // row_inv_rms's
};

// xs = e4m3(rms_norm(v) · (w + offset)) for v [M, D] from load(m, c, vals): the norm's
// sums, then the quantization of its bf16 outputs.
template <typename Load>
__device__ __forceinline__ void quantize_normed(const Staging& st, Load load, const bf16* w,
                                                float eps, float offset, int M, int D) {
  row_inv_rms(st.r, load, M, D, eps, st.sums);
  cuda::quantize_x(
      st.xs, st.sx, st.sinv, st.scratch, st.rows,
      [&](int m, int k, float(&v)[8]) {
        float x[8];
        load(m, k, x);
        normed8(x, st.r[m], w + k, offset, v);
      },
      nullptr, M, D, 1);
}

// A stream's store into out [M, N] bf16.
struct StoreRows {
  bf16* out;
  int N;
  __device__ void operator()(int m, int n, float v) const {
    out[int64_t(m) * N + n] = __float2bfloat16_rn(v);
  }
};

// The CTA's share of weight `t`.
__device__ __forceinline__ cuda::StreamWork work_of(const TailWeight& t, int stages) {
  return cuda::stream_work<cuda::kFp8Chunk, cuda::kStreamRows>(t.N, t.K, stages);
}

template <Activation A>
__global__ void __launch_bounds__(cuda::kStreamThreads)
    layer_tail_kernel(const __grid_constant__ TailParams p, int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  Fp8Ring ring;
  cuda::init_weight_ring(ring, smem, stages);
  cuda::pdl_launch_next();
  ring.wk = work_of(p.o, stages);
  const cuda::StreamWork wo = ring.wk, wgu = work_of(p.gate_up, stages),
                         wd = work_of(p.down, stages), wq = work_of(p.qkv, stages);
  const int first_gu = wo.steps, first_d = first_gu + wgu.steps, first_q = first_d + wd.steps;
  if (int(threadIdx.x) / 32 == kWarps) {  // the producer: all four weights, back to back
    const int lane = int(threadIdx.x) % 32;
    ring.produce(p.o.w, lane, wo, 0);
    if (lane == 0) stamp(p, 12);
    ring.produce(p.gate_up.w, lane, wgu, first_gu);
    if (lane == 0) stamp(p, 13);
    ring.produce(p.down.w, lane, wd, first_d);
    if (lane == 0) stamp(p, 14);
    if (p.qkv.w != nullptr) ring.produce(p.qkv.w, lane, wq, first_q);
    if (lane == 0) stamp(p, 15);
    cuda::pdl_wait();
    return;
  }
  cuda::pdl_wait();  // heads and x come from the kernels before
  const bool stamper = threadIdx.x == 0;
  if (stamper) stamp(p, 0);

  const int M = p.M, D = p.down.N, F = p.down.K;
  uint8_t* xs = ring.end();
  const int x_bytes = M * max(max(p.o.K, D), F);
  float* red = reinterpret_cast<float*>(xs + ((x_bytes + 15) & ~15));
  __shared__ double sx[kMaxRows];
  __shared__ float sinv[kMaxRows], scratch[kMaxRows * kWarps], rows[kMaxRows], r[kMaxRows];
  __shared__ float sums[kWarps];
  const Staging st{xs, sx, sinv, scratch, rows, r, sums};

  // 1. o_out = heads · Woᵀ
  const int Ko = p.o.K;
  cuda::quantize_x(
      xs, sx, sinv, scratch, rows,
      [&](int m, int k, float(&v)[8]) { cuda::load_n<8, true>(p.heads + int64_t(m) * Ko + k, v); },
      nullptr, M, Ko, 1);
  if (stamper) stamp(p, 1);
  cuda::consume_fp8_stream(ring, wo, 0, xs, sx, red, p.o.ws, p.o.bias, M, StoreRows{p.o_out, D});
  if (stamper) stamp(p, 2);
  grid_barrier(p.barrier);
  if (stamper) stamp(p, 3);

  // 2. gu = rms_norm(bf16(x + o_out)) · Wguᵀ
  auto residual8 = [&](int m, int c, float(&v)[8]) {
    float o[8];
    cuda::load_n<8, true>(p.x + int64_t(m) * D + c, v);
    load8_cg(p.o_out + int64_t(m) * D + c, o);
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = round_bf16(v[i] + o[i]);
  };
  quantize_normed(st, residual8, p.ffn_norm, p.ffn_eps, p.ffn_offset, M, D);
  if (stamper) stamp(p, 4);
  const int N_gu = p.gate_up.N;
  cuda::consume_fp8_stream(ring, wgu, first_gu, xs, sx, red, p.gate_up.ws, p.gate_up.bias, M,
                           StoreRows{p.gu, N_gu});
  if (stamper) stamp(p, 5);
  grid_barrier(p.barrier);
  if (stamper) stamp(p, 6);

  // 3. x = bf16(x + o_out) + bf16(act(gate) · up) · Wdᵀ
  cuda::quantize_x(
      xs, sx, sinv, scratch, rows,
      [&](int m, int k, float(&v)[8]) {
        float u[8];
        load8_cg(p.gu + int64_t(m) * N_gu + k, v);
        load8_cg(p.gu + int64_t(m) * N_gu + F + k, u);
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = round_bf16(cuda::activate<A>(v[i]) * u[i]);
      },
      nullptr, M, F, 1);
  if (stamper) stamp(p, 7);
  cuda::consume_fp8_stream(ring, wd, first_d, xs, sx, red, p.down.ws, p.down.bias, M,
                           [&](int m, int n, float v) {
                             const int64_t i = int64_t(m) * D + n;
                             const float x1 = round_bf16(__bfloat162float(p.x[i]) +
                                                         __bfloat162float(__ldcg(p.o_out + i)));
                             p.x[i] = __float2bfloat16_rn(x1 + round_bf16(v));
                           });
  if (stamper) stamp(p, 8);
  if (p.qkv.w == nullptr) return;
  grid_barrier(p.barrier);
  if (stamper) stamp(p, 9);

  // 4. qkv_out = rms_norm(x) · Wqkvᵀ with the next layer's weights
  auto x8 = [&](int m, int c, float(&v)[8]) { load8_cg(p.x + int64_t(m) * D + c, v); };
  quantize_normed(st, x8, p.next_norm, p.next_eps, p.next_offset, M, D);
  if (stamper) stamp(p, 10);
  cuda::consume_fp8_stream(ring, wq, first_q, xs, sx, red, p.qkv.ws, p.qkv.bias, M,
                           StoreRows{p.qkv_out, p.qkv.N});
  if (stamper) stamp(p, 11);
}

// ---------------------------------------------------------------- host side

// EXPERIMENT (session 21, to be removed once measured): the CTA's shared memory in KB,
// TANDEM_TAIL_SMEM_KB, default the streams' 152 (more: a deeper ring, but no decode-attention
// CTA beside it).
int tail_smem() {
  static const int bytes = [] {
    const char* v = std::getenv("TANDEM_TAIL_SMEM_KB");
    return v != nullptr ? std::clamp(std::atoi(v), 100, 227) * 1024 : cuda::kStreamCtaSmem;
  }();
  return bytes;
}
int tail_stages(int64_t other) {
  return int(std::min<int64_t>(cuda::kStreamMaxStages,
                               (tail_smem() - 2048 - cuda::kStreamBarrierBytes - other) /
                                   Fp8Ring::kStageBytes));
}

int64_t x_bytes(int64_t M, int64_t Ko, int64_t D, int64_t F) {
  return M * std::max({Ko, D, F});
}
int64_t other_bytes(int64_t M, int64_t Ko, int64_t D, int64_t F) {
  return ((x_bytes(M, Ko, D, F) + 15) & ~int64_t(15)) + cuda::fp8_red_bytes(int(M));
}

// The weight as the kernel takes it, or false where it cannot: e4m3 [N, K] with dynamic
// per-token input scales and per-tensor or per-channel weight scales, no LoRA, no pieces,
// 16-byte aligned rows (K % 16 == 0), a bf16 bias or none.
bool tail_weight(const Linear* l, int64_t N, int64_t K, TailWeight& t) {
  if (l == nullptr || !l->pieces.empty() || l->lora || !l->takes_fp8_input()) return false;
  const Tensor& w = l->weight;
  if (w.dtype != DType::F8E4M3 || w.device != Device::CUDA || w.ndim() != 2 ||
      w.dim(0) != N || w.dim(1) != K || K % 16 != 0 || !cuda::aligned16(w.data))
    return false;
  if (l->bias.defined() && (l->bias.dtype != DType::BF16 || l->bias.numel() != N)) return false;
  const cuda::WeightScales ws = cuda::weight_scales(*l->quant, K);
  if (l->quant->weight_scale.dtype != DType::F32 || l->quant->weight_scale.numel() != ws.count(N))
    return false;
  t = TailWeight{w.ptr<uint8_t>(), ws, l->bias.defined() ? l->bias.ptr<bf16>() : nullptr, int(N),
                 int(K)};
  return true;
}

bool norm_weight(const Tensor* w, int64_t D) {
  return w != nullptr && w->dtype == DType::BF16 && w->numel() == D && cuda::aligned16(w->data);
}

bool bf16_rows(const Tensor& t, int64_t M, int64_t C) {
  return t.dtype == DType::BF16 && t.device == Device::CUDA && t.ndim() == 2 &&
         t.dim(0) == M && t.dim(1) == C && cuda::aligned16(t.data);
}

template <Activation A>
void launch(CudaBackend& be, const TailParams& p, int stages, int64_t other) {
  static std::atomic<uint64_t> smem_ready{0};
  auto* kernel = &layer_tail_kernel<A>;
  cuda::allow_dynamic_smem(reinterpret_cast<const void*>(kernel), tail_smem() - 2048, smem_ready,
                           "layer_tail_kernel");
  const size_t smem =
      size_t(cuda::kStreamBarrierBytes + int64_t(stages) * Fp8Ring::kStageBytes + other);
  // One CTA per SM, all resident at once: the phases' barriers wait for every CTA.
  const unsigned grid = unsigned(be.props().multiProcessorCount);
  cuda::launch_pdl("layer_tail_kernel", kernel, dim3(grid), dim3(cuda::kStreamThreads), smem,
                   be.stream(), p, stages);
}

}  // namespace

bool CudaBackend::layer_tail(Tensor& x, Tensor& qkv, const Tensor& heads, const LayerTail& t) {
  if (!options_.gemv || !options_.layer_tail || x.ndim() != 2) return false;
  const int64_t M = x.dim(0), D = x.dim(1);
  if (M < 1 || M > kMaxRows || D % 16 != 0 || heads.ndim() != 2) return false;
  const int64_t Ko = heads.dim(1);
  if (t.down == nullptr || t.down->weight.ndim() != 2) return false;
  const int64_t F = t.down->weight.dim(1);
  TailParams p{};
  if (!tail_weight(t.o, D, Ko, p.o) || !tail_weight(t.gate_up, 2 * F, D, p.gate_up) ||
      !tail_weight(t.down, D, F, p.down))
    return false;
  if (!bf16_rows(x, M, D) || !bf16_rows(heads, M, Ko) || !norm_weight(t.ffn_norm, D) ||
      Ko % 16 != 0 || F % 16 != 0)
    return false;
  if (t.act != Activation::SiLU && t.act != Activation::GeluTanh) return false;
  if (t.next_qkv != nullptr) {
    const int64_t Nq = t.next_qkv->out_features();
    if (!tail_weight(t.next_qkv, Nq, D, p.qkv) || !norm_weight(t.next_norm, D) ||
        !bf16_rows(qkv, M, Nq))
      return false;
  }
  if (x_bytes(M, Ko, D, F) > cuda::kFp8MaxXBytes) return false;
  const int64_t other = other_bytes(M, Ko, D, F);
  const int stages = tail_stages(other);
  if (stages < 3) return false;

  Tensor o_out = alloc(DType::BF16, {M, D});
  Tensor gu = alloc(DType::BF16, {M, 2 * F});
  p.heads = heads.ptr<bf16>();
  p.x = x.ptr<bf16>();
  p.ffn_norm = t.ffn_norm->ptr<bf16>();
  p.ffn_eps = t.ffn_eps;
  p.ffn_offset = t.ffn_offset;
  if (t.next_qkv != nullptr) {
    p.next_norm = t.next_norm->ptr<bf16>();
    p.next_eps = t.next_eps;
    p.next_offset = t.next_offset;
    p.qkv_out = qkv.ptr<bf16>();
  }
  p.o_out = o_out.ptr<bf16>();
  p.gu = gu.ptr<bf16>();
  p.barrier = reinterpret_cast<unsigned*>(
      zeroed_counters(layer_tail_barrier_, 1, "layer_tail"));
  p.stamps = layer_tail_stamps_;
  p.M = int(M);
  if (t.act == Activation::SiLU)
    launch<Activation::SiLU>(*this, p, stages, other);
  else
    launch<Activation::GeluTanh>(*this, p, stages, other);
  return true;
}

}  // namespace tandem
