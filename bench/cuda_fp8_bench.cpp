// cuda_fp8_bench: the FP8 linears (cuda_linear_fp8.cu) beside the bf16 ones, Llama-3.1-8B
// shapes. Prints figures; never a gate.
//   1. Decode (1–8 rows): the FP8 weight stream against the bf16 one (cuda_gemv.cu; cuBLAS
//      past 2 rows), per linear in a CUDA graph of `calls` linears cycling over weight
//      copies larger than L2 (so each reads HBM, as decode does); GB/s and % of 4.3 TB/s
//      of the weight bytes.
//   2. Batches and prefill (16–512, 2048, 8192 rows), timed the same way (graphs over
//      weight copies larger than L2): cuBLASLt bf16, the FP8 cuBLASLt path (activation
//      quantize kernel + cuBLASLt e4m3 with outer-vector scales: Fp8GemmPath::Lt) and the
//      wgmma GEMM (quantize + cuda_gemm_fp8_sm90.cu, up to 512 rows) with its plan (token
//      tile x tiles, K splits, CTAs, the rule's estimate); µs per call, TFLOP/s, ratio to bf16.
//   3. With 128 x 128 block scales (DeepSeek-style checkpoints): decode as 1., and the
//      many-row path (the plain stream) against bf16 in eager calls.
//   usage: cuda_fp8_bench [calls_per_graph (default 20)]
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#ifdef TANDEM_HAS_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemm_fp8.h"
#include "backend/cuda/cuda_linear_fp8.h"
#include "cuda_timing.h"

namespace {

using tandem::DType;
using tandem::Linear;
using tandem::Tensor;

constexpr double kMeasuredHbm = 4.3e12;
constexpr int64_t kMinWeightBytes = int64_t(512) << 20;

struct Case {
  const char* name;
  int64_t N, K;
};

Tensor filled(tandem::CudaBackend& be, DType dtype, tandem::Shape shape, int byte) {
  Tensor t = be.alloc(dtype, shape);
  tandem::cuda_check(cudaMemsetAsync(t.data, byte, t.nbytes(), be.stream()), "cudaMemsetAsync");
  return t;
}

bool g_block = false;  // the cases run with 128 x 128 block scales (the "block" pass)

// An FP8 Linear of cheap values (1.0 weights, scales 1/448): per channel, or 128 x 128
// blocks when g_block.
Linear fp8_linear(tandem::CudaBackend& be, int64_t N, int64_t K) {
  Linear l{.weight = filled(be, DType::F8E4M3, {N, K}, 0x38)};
  const int64_t n = g_block ? ((N + 127) / 128) * ((K + 127) / 128) : N;
  Tensor s = tandem::Tensor::empty_host(DType::F32, {n});
  std::fill_n(s.ptr<float>(), n, 1.f / 448.f);
  l.quant = tandem::LinearQuant{.granularity = g_block ? tandem::ScaleGranularity::Block
                                                       : tandem::ScaleGranularity::PerChannel,
                                .weight_scale = be.upload(s, DType::F32),
                                .block_n = g_block ? 128 : 0,
                                .block_k = g_block ? 128 : 0,
                                .input = tandem::InputScaling::Dynamic};
  return l;
}

void decode_case(tandem::CudaBackend& be, const Case& c, int calls) {
  std::string line = fmt::format("{:<8}", c.name);
  for (int64_t M : {1, 2, 4, 8}) {
    Tensor x = filled(be, DType::BF16, {M, c.K}, 0x3c);
    Tensor out = be.alloc(DType::BF16, {M, c.N});
    for (bool fp8 : {false, true}) {
      const int64_t bytes = c.N * c.K * (fp8 ? 1 : 2);
      const int64_t copies = std::max<int64_t>(2, (kMinWeightBytes + bytes - 1) / bytes);
      std::vector<Linear> ws;
      for (int64_t i = 0; i < copies; i++)
        ws.push_back(fp8 ? fp8_linear(be, c.N, c.K) : Linear{filled(be, DType::BF16, {c.N, c.K}, 0x3c)});
      size_t next = 0;
      const double us = 1e6 * tandem::bench::time_graph(be, calls, [&] {
                          be.linear(out, x, ws[next++ % ws.size()]);
                        }).event_s;
      const double gbs = double(bytes) / (us * 1e-6) / 1e9;
      line += fmt::format("  M={} {} {:6.1f} µs {:6.0f} GB/s ({:4.1f}%)", M, fp8 ? "fp8 " : "bf16", us,
                          gbs, 100.0 * gbs * 1e9 / kMeasuredHbm);
    }
  }
  fmt::print("{}\n", line);
}

// `copies` Linears of one shape (bf16, or FP8 per channel), together larger than L2.
std::vector<Linear> weight_copies(tandem::CudaBackend& be, const Case& c, bool fp8) {
  const int64_t bytes = c.N * c.K * (fp8 ? 1 : 2);
  const int64_t copies = std::max<int64_t>(2, (kMinWeightBytes + bytes - 1) / bytes);
  std::vector<Linear> ws;
  for (int64_t i = 0; i < copies; i++)
    ws.push_back(fp8 ? fp8_linear(be, c.N, c.K)
                     : Linear{filled(be, DType::BF16, {c.N, c.K}, 0x3c)});
  return ws;
}

// Seconds per call of out = x · wᵀ in a graph of `calls`, cycling over the weight copies.
double graph_call_s(tandem::CudaBackend& be, int calls, Tensor& out, const Tensor& x,
                    const std::vector<Linear>& ws, tandem::Fp8GemmPath path) {
  tandem::set_fp8_gemm_path(path);
  size_t next = 0;
  const double s = tandem::bench::time_graph(be, calls, [&] {
                     be.linear(out, x, ws[next++ % ws.size()]);
                   }).event_s;
  tandem::set_fp8_gemm_path(tandem::Fp8GemmPath::Auto);
  return s;
}

void gemm_case(tandem::CudaBackend& be, const Case& c, int calls) {
  const std::vector<Linear> bf16 = weight_copies(be, c, false), fp8 = weight_copies(be, c, true);
  const cudaDeviceProp& props = be.props();
  for (int64_t M : {16, 64, 128, 256, 512, 2048, 8192}) {
    Tensor x = filled(be, DType::BF16, {M, c.K}, 0x3c);
    Tensor out = be.alloc(DType::BF16, {M, c.N});
    const double flops = 2.0 * double(M) * double(c.N) * double(c.K);
    auto column = [&](const char* name, double s, double base_s) {
      std::string col = fmt::format("  {} {:7.1f} µs {:6.1f} TF", name, s * 1e6, flops / s / 1e12);
      if (base_s > 0) col += fmt::format(" ({:.2f}x)", base_s / s);
      return col;
    };
    using tandem::Fp8GemmPath;
    const double b = graph_call_s(be, calls, out, x, bf16, Fp8GemmPath::Auto);
    std::string line = fmt::format("{:<8} M={:<5}", c.name, M) + column("bf16", b, 0);
    line += column("| fp8 lt", graph_call_s(be, calls, out, x, fp8, Fp8GemmPath::Lt), b);
    // The wgmma GEMM where it takes the shape (the Wgmma path falls back to Lt elsewhere).
    if (M <= tandem::kFp8WgmmaMaxRows &&
        tandem::fp8_wgmma_fits(props, M, c.N, c.K, fp8[0].weight.data, x.data)) {
      line += column("| fp8 wgmma", graph_call_s(be, calls, out, x, fp8, Fp8GemmPath::Wgmma), b);
      const tandem::Fp8WgmmaPlan p =
          tandem::plan_fp8_wgmma(M, c.N, c.K, props.multiProcessorCount, int(props.sharedMemPerBlockOptin));
      line += fmt::format("  [{}x{} s{} {} CTAs {} st, est {:.1f} µs]", p.token_tile, p.token_tiles,
                          p.splits, p.ctas(), p.stages, p.estimate_us);
    }
    fmt::print("{}\n", line);
  }
}

// Block scales: the many-row path against bf16, eager calls on one weight (as before the
// wgmma GEMM; it does not take block scales).
void block_gemm_case(tandem::CudaBackend& be, const Case& c) {
  Linear bf16{filled(be, DType::BF16, {c.N, c.K}, 0x3c)};
  Linear fp8 = fp8_linear(be, c.N, c.K);
  for (int64_t M : {64, 256, 2048, 8192}) {
    Tensor x = filled(be, DType::BF16, {M, c.K}, 0x3c);
    Tensor out = be.alloc(DType::BF16, {M, c.N});
    const double flops = 2.0 * double(M) * double(c.N) * double(c.K);
    auto tflops = [&](const Linear& l) {
      return flops / tandem::bench::time_calls(be, 5, [&] { be.linear(out, x, l); }).event_s / 1e12;
    };
    const double b = tflops(bf16), f = tflops(fp8);
    fmt::print("{:<8} M={:<5} bf16 {:6.1f}  fp8 {:6.1f} ({:.2f}x) TFLOP/s\n", c.name, M, b, f, f / b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (tandem::cuda_device_count() == 0) {
    std::fprintf(stderr, "cuda_fp8_bench: no CUDA GPU on this machine\n");
    return 1;
  }
  const int calls = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  tandem::CudaBackend be(0);
  const Case cases[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  fmt::print("decode linears, graph of {} calls, % of {:.1f} TB/s\n", calls, kMeasuredHbm / 1e12);
  for (const Case& c : cases) decode_case(be, c, calls);
  fmt::print("many-row linears, graph of {} calls over weights > L2 (fp8 includes quantizing x)\n",
             calls);
  for (const Case& c : cases) gemm_case(be, c, calls);
  g_block = true;
  fmt::print("the same with 128 x 128 block scales (fp8 columns)\n");
  for (const Case& c : cases) decode_case(be, c, calls);
  for (const Case& c : cases) block_gemm_case(be, c);
  return 0;
}

#else
int main() {
  std::fprintf(stderr, "cuda_fp8_bench: built without CUDA\n");
  return 1;
}
#endif
