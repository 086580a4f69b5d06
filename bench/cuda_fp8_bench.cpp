// cuda_fp8_bench: the FP8 linears (cuda_linear_fp8.cu) beside the bf16 ones, Llama-3.1-8B
// shapes. Prints figures; never a gate.
//   1. Decode (1–8 rows): the FP8 weight stream against the bf16 one (cuda_gemv.cu; cuBLAS
//      past 2 rows), per linear in a CUDA graph of `calls` linears cycling over weight
//      copies larger than L2 (so each reads HBM, as decode does); GB/s and % of 4.3 TB/s
//      of the weight bytes.
//   2. Batches and prefill (16–512, 2048, 8192 rows), timed the same way (graphs over
//      weight copies larger than L2): cuBLASLt bf16, the FP8 cuBLASLt path (activation
//      quantize kernel + cuBLASLt e4m3 with outer-vector scales: Fp8GemmPath::Lt) and, up
//      to 512 rows, the wgmma GEMM (quantize + cuda_gemm_fp8_sm90.cu) with its plan (token
//      tile x tiles, splits, CTAs, ring stages, the rule's estimate of the GEMM alone); µs
//      per call, the ratios to bf16 and to cuBLASLt, and which path Auto takes. Then the
//      rows up to which the wgmma GEMM keeps up with cuBLASLt on each shape (the figures
//      for fp8_wgmma_preferred) and its mean speedups.
//   3. With 128 x 128 block scales (DeepSeek-style checkpoints): decode as 1., and the
//      many-row path (the plain stream) against bf16 in eager calls.
//   4. stream: the FP8 weight stream (the ring of cuda_gemv_fp8.cu) on the 8B layer shapes
//      at 1 and 2 rows, timed as 1.: µs and GB/s per shape, then µs a layer (the four
//      linears), the figure issue 45's stream variants were measured by (ring 91.0 µs at 1
//      row, 99.1 at 2 on an H100).
//   usage: cuda_fp8_bench [calls_per_graph (default 20)] [gemm | decode | stream]
//     gemm: section 2 alone, at 16, 32, 64, 96, 128, 192, 256, 384 and 512 rows.
//     decode: section 1 alone. stream: section 4 alone.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

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

// Section 4: the FP8 weight stream on each shape at 1 and 2 rows, and a layer's sum.
void stream_layer(tandem::CudaBackend& be, const std::vector<Case>& cases, int calls) {
  double layer_us[2] = {};  // [rows - 1]
  for (const Case& c : cases) {
    const std::vector<Linear> ws = weight_copies(be, c, true);
    std::string line = fmt::format("stream {:<8}", c.name);
    for (int64_t M : {1, 2}) {
      Tensor x = filled(be, DType::BF16, {M, c.K}, 0x3c);
      Tensor out = be.alloc(DType::BF16, {M, c.N});
      size_t next = 0;
      const double us = 1e6 * tandem::bench::time_graph(be, calls, [&] {
                          be.linear(out, x, ws[next++ % ws.size()]);
                        }).event_s;
      layer_us[M - 1] += us;
      line += fmt::format("  M={} {:6.1f} µs {:5.0f} GB/s", M, us,
                          double(c.N * c.K) / (us * 1e-6) / 1e9);
    }
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }
  fmt::print("stream layer (the four linears)  M=1 {:6.1f} µs  M=2 {:6.1f} µs\n", layer_us[0],
             layer_us[1]);
}

// Seconds per call of out = x · wᵀ in a graph of `calls`, cycling over the weight copies.
double graph_call_s(tandem::CudaBackend& be, int calls, Tensor& out, const Tensor& x,
                    const std::vector<Linear>& ws, tandem::Fp8GemmPath path) {
  be.set_fp8_gemm_path(path);
  size_t next = 0;
  const double s = tandem::bench::time_graph(be, calls, [&] {
                     be.linear(out, x, ws[next++ % ws.size()]);
                   }).event_s;
  be.set_fp8_gemm_path(tandem::Fp8GemmPath::Auto);
  return s;
}

// One row of section 2: µs per call of each path (0: not run).
struct GemmRow {
  int64_t M = 0;
  double bf16_us = 0, lt_us = 0, wgmma_us = 0;
};

std::vector<GemmRow> gemm_case(tandem::CudaBackend& be, const Case& c, int calls,
                               const std::vector<int64_t>& rows) {
  using tandem::Fp8GemmPath;
  const std::vector<Linear> bf16 = weight_copies(be, c, false), fp8 = weight_copies(be, c, true);
  const cudaDeviceProp& props = be.props();
  std::vector<GemmRow> out;
  for (int64_t M : rows) {
    Tensor x = filled(be, DType::BF16, {M, c.K}, 0x3c);
    Tensor y = be.alloc(DType::BF16, {M, c.N});
    const double flops = 2.0 * double(M) * double(c.N) * double(c.K);
    GemmRow r;
    r.M = M;
    r.bf16_us = 1e6 * graph_call_s(be, calls, y, x, bf16, Fp8GemmPath::Auto);
    r.lt_us = 1e6 * graph_call_s(be, calls, y, x, fp8, Fp8GemmPath::Lt);
    std::string line =
        fmt::format("{:<8} M={:<5} bf16 {:6.1f} µs {:6.1f} TF | lt {:6.1f} ({:.2f}x)", c.name, M,
                    r.bf16_us, flops / r.bf16_us / 1e6, r.lt_us, r.bf16_us / r.lt_us);
    const bool fits = M <= tandem::kFp8WgmmaMaxRows &&
                      tandem::fp8_wgmma_fits(props, M, c.N, c.K, fp8[0].weight.data, x.data);
    if (fits) {
      const double us = 1e6 * graph_call_s(be, calls, y, x, fp8, Fp8GemmPath::Wgmma);
      r.wgmma_us = us;
      const tandem::Fp8WgmmaPlan p = tandem::plan_fp8_wgmma(M, c.N, c.K, props.multiProcessorCount,
                                                            int(props.sharedMemPerBlockOptin));
      line += fmt::format(" | wgmma {:6.1f} ({:.2f}x, {:.2f}x lt) [{}x{} s{} g{} {}st e{:.1f}]", us,
                          r.bf16_us / us, r.lt_us / us, p.token_tile, p.token_tiles, p.splits,
                          p.ctas, p.stages, p.estimate_us);
      line += fmt::format(" | auto: {}", tandem::fp8_wgmma_preferred(M, c.N, c.K) ? "wgmma" : "lt");
    }
    fmt::print("{}\n", line);
    std::fflush(stdout);
    out.push_back(r);
  }
  return out;
}

// On each shape the most rows up to which the wgmma GEMM is at least as fast as cuBLASLt
// at every measured count, and its geometric-mean speedup over cuBLASLt (16-512 rows) and
// over bf16 (64-256 rows).
void gemm_summary(const std::vector<Case>& cases, const std::vector<std::vector<GemmRow>>& rows) {
  std::string line = "wgmma keeps up with cuBLASLt (all measured counts) to rows:";
  double log_lt = 0, log_bf16 = 0;
  int n_lt = 0, n_bf16 = 0;
  for (size_t i = 0; i < cases.size(); i++) {
    int64_t keeps_up = 0;
    bool broken = false;
    for (const GemmRow& r : rows[i]) {
      const double us = r.wgmma_us;
      if (us <= 0) continue;
      if (!broken && us <= r.lt_us) keeps_up = r.M;
      if (us > r.lt_us) broken = true;
      log_lt += std::log(r.lt_us / us);
      n_lt++;
      if (r.M >= 64 && r.M <= 256) {
        log_bf16 += std::log(r.bf16_us / us);
        n_bf16++;
      }
    }
    line += fmt::format("  {} {}", cases[i].name, keeps_up);
  }
  line +=
      fmt::format("  | geomean vs lt {:.2f}x | vs bf16 (64-256) {:.2f}x",
                  n_lt ? std::exp(log_lt / n_lt) : 0.0, n_bf16 ? std::exp(log_bf16 / n_bf16) : 0.0);
  fmt::print("{}\n", line);
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
  const bool gemm_only = argc > 2 && std::string(argv[2]) == "gemm";
  const bool decode_only = argc > 2 && std::string(argv[2]) == "decode";
  const bool stream_only = argc > 2 && std::string(argv[2]) == "stream";
  tandem::CudaBackend be(0);
  const std::vector<Case> cases = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  if (stream_only) {
    fmt::print("FP8 weight stream, graph of {} calls over weights > L2\n", calls);
    stream_layer(be, cases, calls);
    return 0;
  }
  if (!gemm_only) {
    fmt::print("decode linears, graph of {} calls, % of {:.1f} TB/s\n", calls, kMeasuredHbm / 1e12);
    for (const Case& c : cases) decode_case(be, c, calls);
    if (decode_only) return 0;
  }
  fmt::print("many-row linears, graph of {} calls over weights > L2 (fp8 includes quantizing x)\n",
             calls);
  const std::vector<int64_t> rows = gemm_only
                                        ? std::vector<int64_t>{16, 32, 64, 96, 128, 192, 256, 384, 512}
                                        : std::vector<int64_t>{16, 64, 128, 256, 512, 2048, 8192};
  std::vector<std::vector<GemmRow>> table;
  for (const Case& c : cases) table.push_back(gemm_case(be, c, calls, rows));
  gemm_summary(cases, table);
  if (gemm_only) return 0;
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
