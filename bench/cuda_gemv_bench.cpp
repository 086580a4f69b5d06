// cuda_gemv_bench: the linears of a decode step of 1, 2 and 4 rows (Llama-3.1-8B shapes)
// through cuBLASLt and through tandem's weight stream (cuda_gemv.cu; it takes 1–2 rows, so
// the M=4 rows show cuBLASLt on every path), with and without programmatic dependent
// launch. Each figure is the median over repetitions of one CUDA
// graph of `calls` back-to-back linears, timed with CUDA events, per linear; the linears
// cycle over copies of the weights that add up to more than L2 holds, so every call reads
// its weights from HBM as a decode step does. Prints figures; never a gate.
//   usage: cuda_gemv_bench [calls_per_graph (default 20)]
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#ifdef TANDEM_HAS_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemv.h"
#include "cuda_timing.h"

namespace {

using tandem::DType;
using tandem::Tensor;

constexpr double kMeasuredHbm = 4.3e12;  // bytes/s, H200 copy bandwidth measured
constexpr int64_t kMinWeightBytes = int64_t(512) << 20;  // ten times the H200's L2

struct Case {
  const char* name;
  int64_t N, K;
  bool out_f32;
};

// Weights [N, K] of cheap values (their values do not change the time).
Tensor filled_weights(tandem::CudaBackend& be, int64_t N, int64_t K) {
  Tensor w = be.alloc(DType::BF16, {N, K});
  tandem::cuda_check(cudaMemsetAsync(w.data, 0x3c, size_t(N * K * 2), be.stream()),
                     "cudaMemsetAsync");
  return w;
}

void bench_case(tandem::CudaBackend& be, const Case& c, int calls) {
  const int64_t bytes = c.N * c.K * 2;
  const int64_t copies = std::max<int64_t>(2, (kMinWeightBytes + bytes - 1) / bytes);
  std::vector<Tensor> weights;
  for (int64_t i = 0; i < copies; i++) weights.push_back(filled_weights(be, c.N, c.K));
  for (int64_t M : {1, 2, 4}) {
    Tensor x = be.alloc(DType::BF16, {M, c.K});
    tandem::cuda_check(cudaMemsetAsync(x.data, 0x3c, size_t(M * c.K * 2), be.stream()),
                       "cudaMemsetAsync");
    Tensor out = be.alloc(c.out_f32 ? DType::F32 : DType::BF16, {M, c.N});
    struct Path {
      const char* name;
      bool gemv, pdl;
    };
    std::string line = fmt::format("{:<8} M={}", c.name, M);
    for (const Path& p : {Path{"cuBLASLt", false, false}, Path{"stream", true, false},
                          Path{"stream+PDL", true, true}}) {
      tandem::CudaOptions options = be.options();
      options.gemv = p.gemv;
      options.pdl = p.pdl;
      be.set_options(options);
      size_t next = 0;  // the linears cycle over the weight copies
      const double us = 1e6 * tandem::bench::time_graph(be, calls, [&] {
                          be.linear(out, x, tandem::Linear{weights[next++ % weights.size()]});
                        }).event_s;
      line += fmt::format("  {} {:7.1f} µs ({:5.1f}%)", p.name, us,
                          100.0 * double(bytes) / (us * 1e-6) / kMeasuredHbm);
    }
    fmt::print("{}\n", line);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (tandem::cuda_device_count() == 0) {
    std::fprintf(stderr, "cuda_gemv_bench: no CUDA GPU on this machine\n");
    return 1;
  }
  const int calls = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  tandem::CudaBackend be(0);
  fmt::print("linear per call, graph of {} calls, % of {:.1f} TB/s\n", calls, kMeasuredHbm / 1e12);
  const Case cases[] = {{"qkv", 6144, 4096, false},
                        {"o", 4096, 4096, false},
                        {"gate_up", 28672, 4096, false},
                        {"down", 4096, 14336, false},
                        {"lm_head", 128256, 4096, true}};
  for (const Case& c : cases) bench_case(be, c, calls);
  return 0;
}

#else
int main() {
  std::fprintf(stderr, "cuda_gemv_bench: built without CUDA\n");
  return 1;
}
#endif
