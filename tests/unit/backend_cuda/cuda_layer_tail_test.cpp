// The fused layer tail (Backend::layer_tail, cuda_layer_tail.cu) against the chain of ops it
// replaces, run on the same GPU (model/layers.cpp's layer_tail when a backend does not
// fuse), and against the CPU twin running that chain. At the 8B shape (D 4096: the norm
// kernel's 512 threads, whose order of sums the tail keeps) the fused kernel must give the
// chain's bits; elsewhere it differs by the order of the norm's sums alone, and from the
// CPU (f32 activations, no bf16 roundings between the ops) by what e4m3 inputs a bf16
// rounding moves to the next step. Launched twice on the same inputs it gives the same
// bits (its grid barrier's counter carries over between launches).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cuda_runtime.h>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda_test_util.h"

namespace tandem {
namespace cuda_layer_tail_test {

struct TailShape {
  int64_t M, D, F, Ko, Nq;
  bool next;                      // with the next layer's norm and q|k|v (else the last layer)
  Activation act;
  ScaleGranularity gate_up_scales;  // the others per channel
  bool qkv_bias;
};

// A random e4m3 Linear [N, K] with dynamic per-token inputs, the same bytes on both backends;
// scales make each output O(1) for inputs O(1).
struct LinearPair {
  Linear cpu, gpu;
};
LinearPair fp8_linear(test::Backends& be, std::mt19937& rng, int64_t N, int64_t K,
                      ScaleGranularity g, bool bias) {
  Tensor codes = Tensor::empty_host(DType::F8E4M3, {N, K});
  std::uniform_real_distribution<float> value(-448.f, 448.f);
  for (int64_t i = 0; i < N * K; i++) codes.ptr<uint8_t>()[i] = f32_to_f8e4m3(value(rng));
  const int64_t num_scales = g == ScaleGranularity::PerChannel ? N : 1;
  std::uniform_real_distribution<float> scale(1.f, 3.f);
  std::vector<float> s(static_cast<size_t>(num_scales));
  for (float& v : s) v = scale(rng) / (448.f * std::sqrt(float(K)));
  const std::vector<float> b = test::random_bf16(rng, size_t(N));
  LinearPair p;
  for (Backend* backend : {be.cpu.get(), static_cast<Backend*>(be.gpu.get())}) {
    Linear l;
    l.weight = backend->upload(codes, DType::F8E4M3);
    LinearQuant q;
    q.granularity = g;
    q.weight_scale = backend->upload(test::host_f32(s, {num_scales}), DType::F32);
    q.input = InputScaling::Dynamic;
    l.quant = q;
    if (bias) l.bias = test::put(*backend, b, {N});
    (backend == be.cpu.get() ? p.cpu : p.gpu) = l;
  }
  return p;
}

struct Weights {
  LinearPair o, gate_up, down, qkv;
  std::vector<float> ffn_norm, next_norm;
};

struct Side {  // one backend's weights as the op takes them
  Tensor ffn_norm, next_norm;
  LayerTail tail;
};
Side side(Backend& be, const Weights& w, const TailShape& s, bool cpu) {
  Side out;
  out.ffn_norm = test::put(be, w.ffn_norm, {s.D});
  out.next_norm = test::put(be, w.next_norm, {s.D});
  auto pick = [&](const LinearPair& p) { return cpu ? &p.cpu : &p.gpu; };
  out.tail = LayerTail{pick(w.o), nullptr, 1e-5f, 0.f, pick(w.gate_up), pick(w.down), s.act};
  if (s.next) {
    out.tail.next_eps = 1e-6f;
    out.tail.next_qkv = pick(w.qkv);
  }
  return out;
}

// The ops the tail fuses, one by one (layers.cpp's layer_tail unfused).
void chain(Backend& be, Tensor& x, Tensor& qkv, const Tensor& heads, const LayerTail& t) {
  const int64_t M = x.rows(), D = x.cols(), F = t.down->weight.dim(1);
  const DType act = be.act_dtype();
  Tensor attn = be.alloc(act, {M, D});
  be.linear(attn, heads, *t.o);
  Tensor h = be.alloc(act, {M, D});
  be.add_rms_norm(h, x, attn, *t.ffn_norm, t.ffn_eps, t.ffn_offset);
  Tensor gu = be.alloc(act, {M, 2 * F});
  be.linear(gu, h, *t.gate_up);
  Tensor a = be.alloc(act, {M, F});
  be.gated_act(a, gu, t.act);
  Tensor d = be.alloc(act, {M, D});
  be.linear(d, a, *t.down);
  if (t.next_qkv == nullptr) {
    be.add(x, x, d);
    return;
  }
  be.add_rms_norm(h, x, d, *t.next_norm, t.next_eps, t.next_offset);
  be.linear(qkv, h, *t.next_qkv);
}

void check_shape(const TailShape& s, uint32_t seed, bool exact) {
  test::Backends be;
  std::mt19937 rng(seed);
  Weights w;
  w.o = fp8_linear(be, rng, s.D, s.Ko, ScaleGranularity::PerChannel, false);
  w.gate_up = fp8_linear(be, rng, 2 * s.F, s.D, s.gate_up_scales, false);
  w.down = fp8_linear(be, rng, s.D, s.F, ScaleGranularity::PerChannel, false);
  w.qkv = fp8_linear(be, rng, s.Nq, s.D, ScaleGranularity::PerChannel, s.qkv_bias);
  w.ffn_norm = test::random_bf16(rng, size_t(s.D), 0.5f, 1.5f);
  w.next_norm = test::random_bf16(rng, size_t(s.D), 0.5f, 1.5f);
  const std::vector<float> x0 = test::random_bf16(rng, size_t(s.M * s.D));
  const std::vector<float> heads = test::random_bf16(rng, size_t(s.M * s.Ko));

  Side cs = side(*be.cpu, w, s, true), gs = side(*be.gpu, w, s, false);
  cs.tail.ffn_norm = &cs.ffn_norm;
  cs.tail.next_norm = &cs.next_norm;
  gs.tail.ffn_norm = &gs.ffn_norm;
  gs.tail.next_norm = &gs.next_norm;

  // The CPU twin.
  Tensor x_cpu = test::put(*be.cpu, x0, {s.M, s.D});
  Tensor qkv_cpu = be.cpu->alloc(be.cpu->act_dtype(), {s.M, s.Nq});
  ASSERT_FALSE(be.cpu->layer_tail(x_cpu, qkv_cpu, test::put(*be.cpu, heads, {s.M, s.Ko}), cs.tail))
      << "the CPU composes the tail";
  chain(*be.cpu, x_cpu, qkv_cpu, test::put(*be.cpu, heads, {s.M, s.Ko}), cs.tail);

  // The GPU chain, then the fused tail twice.
  const Tensor heads_gpu = test::put(*be.gpu, heads, {s.M, s.Ko});
  Tensor x_chain = test::put(*be.gpu, x0, {s.M, s.D});
  Tensor qkv_chain = test::poisoned(*be.gpu, DType::BF16, {s.M, s.Nq});
  chain(*be.gpu, x_chain, qkv_chain, heads_gpu, gs.tail);
  std::vector<float> x_fused[2], qkv_fused[2];
  for (int run = 0; run < 2; run++) {
    Tensor x = test::put(*be.gpu, x0, {s.M, s.D});
    Tensor qkv = test::poisoned(*be.gpu, DType::BF16, {s.M, s.Nq});
    ASSERT_TRUE(be.gpu->layer_tail(x, qkv, heads_gpu, gs.tail)) << "the shape is the tail's";
    x_fused[run] = test::to_vec(*be.gpu, x);
    if (s.next) qkv_fused[run] = test::to_vec(*be.gpu, qkv);
  }
  EXPECT_EQ(x_fused[0], x_fused[1]) << "a second launch gives the same bits";
  EXPECT_EQ(qkv_fused[0], qkv_fused[1]);

  const std::vector<float> x_ref = test::to_vec(*be.gpu, x_chain), x_twin = test::to_vec(*be.cpu, x_cpu);
  const double x_err = test::rel_err(x_fused[0], x_ref), x_cpu_err = test::rel_err(x_fused[0], x_twin);
  const double chain_cpu_err = test::rel_err(x_ref, x_twin);
  std::printf("M %lld D %lld F %lld: x vs the GPU chain %.3g, vs the CPU %.3g (chain vs CPU %.3g)\n",
              (long long)s.M, (long long)s.D, (long long)s.F, x_err, x_cpu_err, chain_cpu_err);
  if (exact)
    EXPECT_EQ(x_fused[0], x_ref) << "the chain's bits at D 4096";
  else
    EXPECT_LE(x_err, 2e-2);
  EXPECT_LE(x_cpu_err, 1e-1);
  if (!s.next) return;
  const std::vector<float> q_ref = test::to_vec(*be.gpu, qkv_chain), q_twin = test::to_vec(*be.cpu, qkv_cpu);
  const double q_err = test::rel_err(qkv_fused[0], q_ref), q_cpu_err = test::rel_err(qkv_fused[0], q_twin);
  std::printf("  qkv vs the GPU chain %.3g, vs the CPU %.3g (chain vs CPU %.3g)\n", q_err, q_cpu_err,
              test::rel_err(q_ref, q_twin));
  if (exact)
    EXPECT_EQ(qkv_fused[0], q_ref) << "the chain's bits at D 4096";
  else
    EXPECT_LE(q_err, 5e-2);
  EXPECT_LE(q_cpu_err, 1.5e-1);
}

TEST(CudaLayerTail, GivesTheChainsBitsAtThe8BShape) {
  TANDEM_SKIP_WITHOUT_CUDA();
  // Llama 3.1 8B's layer: one row with the next layer's q|k|v, two rows of the last layer.
  check_shape({1, 4096, 14336, 4096, 6144, true, Activation::SiLU, ScaleGranularity::PerChannel,
               false},
              71, true);
  check_shape({2, 4096, 14336, 4096, 6144, false, Activation::SiLU, ScaleGranularity::PerChannel,
               false},
              72, true);
}

TEST(CudaLayerTail, MatchesTheChainOnOtherShapes) {
  TANDEM_SKIP_WITHOUT_CUDA();
  // Rows of 1024 (the chain's norm takes a warp a row there), three and eight rows, GELU, a
  // per-tensor scale, a q|k|v bias (Qwen2), N not a multiple of the stream's 16 rows.
  check_shape({3, 1024, 2816, 1024, 1536 + 8, true, Activation::GeluTanh,
               ScaleGranularity::PerTensor, true},
              73, false);
  check_shape({8, 2048, 4096, 2048, 2560, true, Activation::SiLU, ScaleGranularity::PerChannel,
               false},
              74, false);
}

TEST(CudaLayerTail, RefusesWhatItDoesNotFuseAndLeavesXAlone) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(75);
  const int64_t D = 256, F = 512, M = 9;  // 9 rows: past the stream's 8
  LinearPair o = fp8_linear(be, rng, D, D, ScaleGranularity::PerChannel, false);
  LinearPair gu = fp8_linear(be, rng, 2 * F, D, ScaleGranularity::PerChannel, false);
  LinearPair down = fp8_linear(be, rng, D, F, ScaleGranularity::PerChannel, false);
  Tensor norm = test::put(*be.gpu, test::random_bf16(rng, size_t(D), 0.5f, 1.5f), {D});
  const std::vector<float> x0 = test::random_bf16(rng, size_t(M * D));
  Tensor x = test::put(*be.gpu, x0, {M, D}), qkv;
  const LayerTail t{&o.gpu, &norm, 1e-5f, 0.f, &gu.gpu, &down.gpu, Activation::SiLU};
  EXPECT_FALSE(be.gpu->layer_tail(x, qkv, test::put(*be.gpu, x0, {M, D}), t));
  EXPECT_EQ(test::to_vec(*be.gpu, x), x0);
  // A bf16 weight (no FP8): the chain's.
  Tensor x1 = test::put(*be.gpu, std::vector<float>(x0.begin(), x0.begin() + D), {1, D});
  Linear bf16_o;
  bf16_o.weight = test::put(*be.gpu, test::random_bf16(rng, size_t(D * D)), {D, D});
  const LayerTail t2{&bf16_o, &norm, 1e-5f, 0.f, &gu.gpu, &down.gpu, Activation::SiLU};
  EXPECT_FALSE(be.gpu->layer_tail(x1, qkv, x1, t2));
  // Switched off.
  CudaOptions off = be.gpu->options();
  off.layer_tail = false;
  be.gpu->set_options(off);
  const LayerTail t3{&o.gpu, &norm, 1e-5f, 0.f, &gu.gpu, &down.gpu, Activation::SiLU};
  EXPECT_FALSE(be.gpu->layer_tail(x1, qkv, x1, t3));
}


// A diagnostic beside the check: each CTA's global-timer stamps after the steps of its phases
// (cuda_layer_tail.cu, stamp()) must be written and in order; their spread is printed, the
// time each step takes at the 8B shape (one row, launched back to back).
TEST(CudaLayerTail, PhaseStampsAreWrittenInOrder) {
  TANDEM_SKIP_WITHOUT_CUDA();
  test::Backends be;
  std::mt19937 rng(76);
  const int64_t M = 1, D = 4096, F = 14336, Nq = 6144;
  LinearPair o = fp8_linear(be, rng, D, D, ScaleGranularity::PerChannel, false);
  LinearPair gu = fp8_linear(be, rng, 2 * F, D, ScaleGranularity::PerChannel, false);
  LinearPair down = fp8_linear(be, rng, D, F, ScaleGranularity::PerChannel, false);
  LinearPair qkv_w = fp8_linear(be, rng, Nq, D, ScaleGranularity::PerChannel, false);
  Tensor norm = test::put(*be.gpu, test::random_bf16(rng, size_t(D), 0.5f, 1.5f), {D});
  const std::vector<float> x0 = test::random_bf16(rng, size_t(M * D));
  Tensor x = test::put(*be.gpu, x0, {M, D}), heads = test::put(*be.gpu, x0, {M, D});
  Tensor qkv = be.gpu->alloc(DType::BF16, {M, Nq});
  LayerTail t{&o.gpu, &norm, 1e-5f, 0.f, &gu.gpu, &down.gpu, Activation::SiLU};
  t.next_norm = &norm;
  t.next_qkv = &qkv_w.gpu;
  const int ctas = be.gpu->props().multiProcessorCount, kStamps = 16;
  uint64_t* stamps = nullptr;
  ASSERT_EQ(cudaMalloc(&stamps, size_t(ctas) * kStamps * sizeof(uint64_t)), cudaSuccess);
  ASSERT_EQ(cudaMemset(stamps, 0, size_t(ctas) * kStamps * sizeof(uint64_t)), cudaSuccess);
  be.gpu->set_layer_tail_stamps(stamps);
  for (int i = 0; i < 20; i++) ASSERT_TRUE(be.gpu->layer_tail(x, qkv, heads, t));
  be.gpu->synchronize();
  be.gpu->set_layer_tail_stamps(nullptr);
  std::vector<uint64_t> h(size_t(ctas) * kStamps);
  ASSERT_EQ(cudaMemcpy(h.data(), stamps, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(stamps);
  const char* steps[kStamps] = {"start",       "quantize heads", "o",         "barrier 1",
                                "norm",        "gate|up",        "barrier 2", "activation",
                                "down",        "barrier 3",      "norm",      "q|k|v",
                                "o issued",    "gate|up issued", "down issued", "q|k|v issued"};
  uint64_t t0 = UINT64_MAX;
  for (int c = 0; c < ctas; c++) t0 = std::min(t0, h[size_t(c) * kStamps]);
  for (int k = 0; k < kStamps; k++) {
    std::vector<double> us;  // steps 1..11: since the step before; 0, 12..15: since the first start
    for (int c = 0; c < ctas; c++) {
      const uint64_t* s = &h[size_t(c) * kStamps];
      ASSERT_NE(s[k], 0u) << "CTA " << c << " step " << k;
      if (k >= 1 && k <= 11) {
        ASSERT_GE(s[k], s[k - 1]) << "CTA " << c << " step " << k;
      }
      us.push_back(double((k >= 1 && k <= 11) ? s[k] - s[k - 1] : s[k] - t0) / 1e3);
    }
    std::sort(us.begin(), us.end());
    std::printf("%-15s min %7.2f  median %7.2f  max %7.2f us\n", steps[k], us.front(),
                us[us.size() / 2], us.back());
  }
}

}  // namespace cuda_layer_tail_test
}  // namespace tandem
