// gguf_bench: the CPU linears on ggml block types (cpu_block_gemm.h) against bf16, at the
// llama-100m shapes: one decode step's GEMMs (12 layers of qkv 1280x768, o 768x768, gate_up
// 4096x768, down 768x2048, and the 32000x768 lm_head), all in one weight type, at 1 / 4 / 16
// rows (and 64 / 512 for prefill), for each arithmetic (exact: f32 activations; int8: 8-bit
// activations) and instruction set. Prints the step's time, the weight bytes it streams per
// second, and the tok/s it is worth (rows / step time: the GEMMs alone, no attention). Weights
// are random normals encoded by quantize_row and uploaded through the CPU backend (huge
// pages, as served). Figures, never a gate.
//   usage: gguf_bench [--threads N] [--min-seconds S (0.3)] [--cpu-time] [--types q4_k,q8_0]
//                     [--rows 1,4,16] [--no-panels] [--isa avx2|avx512] [--arith exact|int8]
// The Int8 product reads panels (cpu_block_panels.h) packed here as the backend packs them at
// upload, unless --no-panels.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_block_gemm.h"
#include "backend/cpu/cpu_gemm.h"
#include "core/block_quant.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace {

using namespace tandem;

bool g_cpu_time = false;
std::string g_isa, g_arith;  // "" = all

double now_seconds() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per call: the median of 5 timings of enough calls to fill min_seconds / 5.
double time_per_call(const std::function<void()>& fn, double min_seconds) {
  fn();
  int calls = 1;
  for (const double t0 = now_seconds(); now_seconds() - t0 < min_seconds / 5;) fn(), calls++;
  std::vector<double> runs;
  for (int r = 0; r < 5; r++) {
    const double t0 = now_seconds();
    for (int i = 0; i < calls; i++) fn();
    runs.push_back((now_seconds() - t0) / calls);
  }
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

struct Matrix {
  int64_t N, K;
  Tensor w;
  std::vector<uint8_t> panels;  // cpu_block_panels.h, where the type has them
};

bool g_panels = true;

// The decode step's matrices in `dtype`, on the backend.
std::vector<Matrix> step_weights(CpuBackend& be, DType dtype, std::mt19937& rng) {
  std::vector<Matrix> step;
  for (int layer = 0; layer < 12; layer++)
    for (auto [N, K] : {std::pair{1280, 768}, {768, 768}, {4096, 768}, {768, 2048}})
      step.push_back({N, K, {}});
  step.push_back({32000, 768, {}});
  std::normal_distribution<float> dist(0.f, 0.03f);
  for (Matrix& m : step) {
    std::vector<float> v(size_t(m.N * m.K));
    for (float& x : v) x = dist(rng);
    Tensor host = Tensor::empty_host(dtype, {m.N, m.K});
    if (dtype_is_block(dtype)) {
      const size_t row = dtype_row_bytes(dtype, m.K);
      for (int64_t n = 0; n < m.N; n++)
        quantize_row(dtype, v.data() + n * m.K, host.ptr<uint8_t>() + size_t(n) * row, m.K);
    } else {
      convert_from_f32(v.data(), host.data, dtype, v.size());
    }
    m.w = be.upload(host, dtype);
    if (g_panels && cpu::block_panels_supported(dtype)) {
      m.panels.resize(cpu::block_panels_bytes(dtype, m.N, m.K));
      cpu::pack_block_panels(be.pool(), dtype, m.w.data, m.N, m.K, m.panels.data());
    }
  }
  return step;
}

void bench(CpuBackend& be, const std::vector<Matrix>& step, DType dtype, int64_t M,
           cpu::BlockArithmetic a, double min_s) {
  ThreadPool& pool = be.pool();
  std::vector<float> x(size_t(M) * 2048), out(size_t(M) * 32000);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float& v : x) v = dist(rng);
  size_t bytes = 0;
  for (const Matrix& m : step) bytes += m.w.nbytes();
  const double s = time_per_call(
      [&] {
        for (const Matrix& m : step) {
          if (dtype_is_block(dtype))
            cpu::block_gemm_xwt(pool, out.data(), x.data(), m.w.data, dtype, M, m.N, m.K, a,
                                be.isa(), m.panels.empty() ? nullptr : m.panels.data());
          else
            cpu::gemm_xwt(pool, out.data(), x.data(), m.w.data, dtype, M, m.N, m.K, {be.isa()});
        }
      },
      min_s);
  fmt::print("{:<6} {:<6} {:<5} M={:<3} {:6.1f} MB {:10.1f} us {:7.1f} GB/s {:9.1f} tok/s\n",
             cpu_isa_name(be.isa()), dtype_name(dtype),
             dtype_is_block(dtype) ? cpu::block_arithmetic_name(a) : "f32", M, double(bytes) * 1e-6,
             s * 1e6, double(bytes) / s * 1e-9, double(M) / s);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double min_s = 0.3;
  std::vector<std::string> types = {"bf16", "q4_k", "q8_0"};
  std::vector<int64_t> rows = {1, 4, 16};
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      ThreadPool::set_global_threads(std::atoi(argv[++i]));
    } else if (a == "--min-seconds" && i + 1 < argc) {
      min_s = std::atof(argv[++i]);
    } else if (a == "--no-panels") {
      g_panels = false;
    } else if (a == "--isa" && i + 1 < argc) {
      g_isa = argv[++i];
    } else if (a == "--arith" && i + 1 < argc) {
      g_arith = argv[++i];
    } else if (a == "--cpu-time") {
      g_cpu_time = true;
    } else if (a == "--types" && i + 1 < argc) {
      types = split(argv[++i]);
    } else if (a == "--rows" && i + 1 < argc) {
      rows.clear();
      for (const std::string& r : split(argv[++i])) rows.push_back(std::atoll(r.c_str()));
    } else {
      fmt::print(stderr,
                 "usage: gguf_bench [--threads N] [--min-seconds S] [--cpu-time] "
                 "[--types bf16,q4_k,...] [--rows 1,4,16] [--no-panels] [--isa avx2|avx512] "
                 "[--arith exact|int8]\n");
      return 2;
    }
  }
  ThreadPool& pool = ThreadPool::global();
  fmt::print("threads {}, isa max {}, vnni {}\n", pool.num_threads(), cpu_isa_name(cpu_max_isa()),
             cpu_features().avx512_vnni);
  std::vector<CpuIsa> isas{CpuIsa::Avx2};
  if (cpu_max_isa() >= CpuIsa::Avx512) isas.push_back(CpuIsa::Avx512);
  if (!g_isa.empty()) std::erase_if(isas, [](CpuIsa i) { return cpu_isa_name(i) != g_isa; });
  std::mt19937 rng(0);
  for (const std::string& name : types) {
    DType dtype = DType::BF16;
    bool found = false;
    for (int d = 0; d <= int(DType::IQ4_XS); d++)
      if (dtype_name(DType(d)) == name) dtype = DType(d), found = true;
    if (!found || dtype == DType::I32 || dtype == DType::F8E4M3) {
      fmt::print(stderr, "gguf_bench: unknown weight type {}\n", name);
      return 2;
    }
    for (CpuIsa isa : isas) {
      CpuBackend be(&pool, isa);
      const std::vector<Matrix> step = step_weights(be, dtype, rng);
      for (int64_t M : rows)
        for (auto a : {cpu::BlockArithmetic::Exact, cpu::BlockArithmetic::Int8}) {
          if (!dtype_is_block(dtype) && a == cpu::BlockArithmetic::Int8) continue;
          if (dtype_is_block(dtype) && !g_arith.empty() && cpu::block_arithmetic_name(a) != g_arith)
            continue;
          bench(be, step, dtype, M, a, min_s);
        }
    }
  }
  return 0;
}
