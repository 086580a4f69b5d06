// cpu_ops_bench: the CPU kernels against this machine's memory bandwidth. Measures the
// bandwidth first (a multi-threaded read of a buffer far larger than the caches), then
// the GEMM (cpu_gemm.h) at the llama-100m shapes for 1/4/16 rows and at prefill sizes,
// on each instruction set the machine runs and each path (own kernels, OpenBLAS on
// widened tiles), then paged decode attention. GB/s counts the bytes an op must read
// from memory (weights; for attention the KV it reads); prints figures, never a gate.
//   usage: cpu_ops_bench [--threads N] [--min-seconds S (0.3)] [--quick] [--cpu-time]
//                        [--only gemm|stream|attention]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gemm.h"
#include "cli/env_switches.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace {

using namespace tandem;

// --cpu-time: time by the process's CPU time instead of the wall clock. On a shared
// machine the wall clock counts the time other processes hold the cores; CPU time does
// not (but counts the pool's workers spinning, so it suits --threads 1 best).
bool g_cpu_time = false;

double now_seconds() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per call of fn: the median of 5 timings of enough calls to fill min_seconds/5.
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

// Read bandwidth: every thread sums its share of a 1 GiB buffer (8-wide lanes).
double measure_read_bandwidth(ThreadPool& pool, double min_s) {
  const size_t n = size_t(1) << 28;  // floats
  std::vector<float> buf(n, 1.f);
  std::vector<double> sink(size_t(pool.num_threads()) * 16);
  const double s = time_per_call(
      [&] {
        pool.parallel_for(
            int64_t(n / 4096),
            [&](int64_t b, int64_t e) {
              float lanes[16] = {};
              for (int64_t i = b * 4096; i < e * 4096; i += 16)
                for (int l = 0; l < 16; l++) lanes[l] += buf[size_t(i + l)];
              float t = 0;
              for (float v : lanes) t += v;
              sink[size_t(b % int64_t(sink.size()))] += t;
            },
            int64_t(pool.num_threads()) * 8);
      },
      min_s);
  return double(n) * 4 / s * 1e-9;
}

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.02f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(dist(rng));
  return v;
}

struct GemmShape {
  const char* name;
  int64_t N, K;
};

void bench_gemm(ThreadPool& pool, const GemmShape& l, int64_t M, CpuIsa isa, cpu::GemmPath path,
                double bandwidth, double min_s, std::mt19937& rng) {
  const auto w = random_bf16(size_t(l.N * l.K), rng);
  std::vector<float> x(size_t(M * l.K), 0.5f), out(size_t(M * l.N));
  const cpu::GemmOptions opt{isa, path};
  const double s = time_per_call(
      [&] { cpu::gemm_xwt(pool, out.data(), x.data(), w.data(), DType::BF16, M, l.N, l.K, opt); },
      min_s);
  const double gbs = double(l.N * l.K * 2) / s * 1e-9;
  fmt::print("gemm   {:<8} {:<7} {:<7} M={:<4} N={:<5} K={:<5} {:9.1f} us {:7.1f} GB/s ({:3.0f}% of "
             "bw) {:7.1f} GFLOP/s\n",
             l.name, cpu_isa_name(isa), path == cpu::GemmPath::Blas ? "blas" : "kernels", M, l.N,
             l.K, s * 1e6, gbs, 100 * gbs / bandwidth, 2.0 * M * l.N * l.K / s * 1e-9);
}

// The last `tokens` positions of each row's `context` as queries (1: a decode step;
// tokens = context: a prompt's prefill), llama-100m heads. GB/s counts the KV the step
// must read once; GFLOP/s the causal products (q·k and p·v).
void bench_attention(Backend& be, int rows, int context, int tokens, double bandwidth,
                     double min_s) {
  const int Hq = 12, Hkv = 4, Dh = 64, bs = 16, per_row = (context + bs - 1) / bs;
  PagedKv cache{be.zeros(DType::F32, {rows * per_row, bs, Hkv, Dh}),
                be.zeros(DType::F32, {rows * per_row, bs, Hkv, Dh})};
  for (Tensor* t : {&cache.k, &cache.v})
    for (int64_t i = 0; i < t->numel(); i++) t->ptr<float>()[i] = float(i % 97) * 0.01f;
  std::vector<int32_t> pos, starts{0}, ctx, table, slots;
  for (int b = 0; b < rows; b++) {
    for (int i = 0; i < per_row; i++) table.push_back(b * per_row + i);
    for (int p = context - tokens; p < context; p++) {
      pos.push_back(p);
      slots.push_back(table[size_t(b * per_row + p / bs)] * bs + p % bs);
    }
    starts.push_back((b + 1) * tokens);
    ctx.push_back(context);
  }
  auto i32 = [&](const std::vector<int32_t>& v, Shape shape) {
    Tensor t = be.alloc(DType::I32, shape);
    be.write_i32(t, v.data(), int64_t(v.size()));
    return t;
  };
  const int T = rows * tokens;
  StepTensors step;
  step.num_tokens = T;
  step.num_rows = rows;
  step.max_context_len = context;
  step.block_size = bs;
  step.positions = i32(pos, {T});
  step.seq_starts = i32(starts, {rows + 1});
  step.context_lens = i32(ctx, {rows});
  step.groups = {{i32(slots, {T}), i32(table, {rows, per_row}), per_row}};
  Tensor q = be.zeros(DType::F32, {T, Hq, Dh}), out = be.alloc(DType::F32, {T, Hq, Dh});
  for (int64_t i = 0; i < q.numel(); i++) q.ptr<float>()[i] = float(i % 89) * 0.003f;
  const AttentionParams params{0.125f, 0.f, 0};
  const double s = time_per_call([&] { be.attention(out, q, cache, step, params); }, min_s);
  const double gbs = 2.0 * rows * context * Hkv * Dh * 4 / s * 1e-9;
  double keys = 0;  // (query token, key) pairs
  for (int p = context - tokens; p < context; p++) keys += p + 1;
  fmt::print("attention B={:<3} ctx={:<5} tokens={:<4} f32 KV {:9.1f} us {:7.1f} GB/s ({:3.0f}% of bw) "
             "{:7.2f} GFLOP/s\n",
             rows, context, tokens, s * 1e6, gbs, 100 * gbs / bandwidth,
             4.0 * rows * Hq * keys * Dh / s * 1e-9);
}

// M rows through every weight of a llama-100m decode step in order (12 x qkv, o, gate_up,
// down, then lm_head: 200 MB in bf16, far past the caches), the weights uploaded by the
// backend (so on the huge pages it gives them): what one decode step's GEMMs cost. With
// e4m3 the layers' weights are FP8 (their bytes, unscaled: what the FP8 linear streams)
// and the lm_head stays bf16, as in an FP8 checkpoint.
void bench_decode_stream(ThreadPool& pool, Backend& be, CpuIsa isa, int64_t M, DType dtype,
                         double bandwidth, double min_s, std::mt19937& rng) {
  struct Matrix {
    int64_t N, K;
    Tensor w;
    DType dtype = DType::BF16;
  };
  std::vector<Matrix> step;
  for (int layer = 0; layer < 12; layer++)
    for (auto [N, K] : {std::pair{1280, 768}, {768, 768}, {4096, 768}, {768, 2048}})
      step.push_back({N, K, {}});
  for (Matrix& m : step) m.dtype = dtype;
  step.push_back({32000, 768, {}});
  size_t bytes = 0;
  for (Matrix& m : step) {
    const auto host = random_bf16(size_t(m.N * m.K), rng);
    Tensor t = Tensor::borrow(const_cast<uint16_t*>(host.data()), DType::BF16, {m.N, m.K});
    if (m.dtype == DType::F8E4M3) {  // the bf16 values · 1000, a typical e4m3 range
      Tensor q = Tensor::empty_host(DType::F8E4M3, {m.N, m.K});
      for (int64_t i = 0; i < m.N * m.K; i++)
        q.ptr<uint8_t>()[i] = f32_to_f8e4m3(bf16_to_f32(host[size_t(i)]) * 1000.f);
      t = q;
    }
    m.w = be.upload(t, m.dtype);
    bytes += m.w.nbytes();
  }
  std::vector<float> x(size_t(M) * 4096, 0.5f), out(size_t(M) * 32000);
  const cpu::GemmOptions opt{isa, cpu::GemmPath::Kernels};
  const double s = time_per_call(
      [&] {
        for (const Matrix& m : step)
          cpu::gemm_xwt(pool, out.data(), x.data(), m.w.data, m.dtype, M, m.N, m.K, opt);
      },
      min_s);
  const double gbs = double(bytes) / s * 1e-9;
  fmt::print("decode stream {:<7} {:<4} M={:<2} {:.0f} MB of weights {:9.1f} us {:7.1f} GB/s ({:3.0f}% "
             "of bw) {:6.1f} GFLOP/s\n",
             cpu_isa_name(isa), dtype == DType::F8E4M3 ? "e4m3" : "bf16", M,
             double(bytes) * 1e-6, s * 1e6, gbs, 100 * gbs / bandwidth,
             double(M) * double(bytes) / s * 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  double min_s = 0.3;
  bool quick = false;
  int threads = 0;
  std::string only;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--min-seconds" && i + 1 < argc) min_s = std::atof(argv[++i]);
    else if (a == "--quick") quick = true;
    else if (a == "--cpu-time") g_cpu_time = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else
      return fmt::print(stderr, "usage: cpu_ops_bench [--threads N] [--min-seconds S] [--quick] "
                                "[--cpu-time] [--only gemm|stream|attention]\n"),
             2;
  }
  if (!tandem::cli::apply_process_switches(threads)) return 1;  // --threads, TANDEM_*
  auto wanted = [&](const char* part) { return only.empty() || only == part; };
  ThreadPool& pool = ThreadPool::global();
  std::mt19937 rng(0);
  const double bw = measure_read_bandwidth(pool, min_s);
  fmt::print("threads {}, isa {} (max {}), memory read bandwidth {:.1f} GB/s\n", pool.num_threads(),
             cpu_isa_name(cpu_isa()), cpu_isa_name(cpu_max_isa()), bw);
  // llama-100m: dim 768, 12/4 heads of 64, ffn 2048, vocab 32000 (bf16 weights).
  const GemmShape shapes[] = {{"qkv", 1280, 768}, {"o", 768, 768}, {"gate_up", 4096, 768},
                           {"down", 768, 2048}, {"lm_head", 32000, 768}};
  std::vector<CpuIsa> isas{CpuIsa::Avx2};
  if (cpu_max_isa() >= CpuIsa::Avx512) isas.push_back(CpuIsa::Avx512);
  if (wanted("gemm")) {
    for (int64_t M : {1, 4, 16})
      for (const GemmShape& l : shapes)
        for (CpuIsa isa : isas) bench_gemm(pool, l, M, isa, cpu::GemmPath::Kernels, bw, min_s, rng);
    for (int64_t M : {64, 512})
      for (const GemmShape& l : {shapes[0], shapes[2], shapes[3]})
        for (cpu::GemmPath p : {cpu::GemmPath::Kernels, cpu::GemmPath::Blas})
          for (CpuIsa isa : isas) {
            if (p == cpu::GemmPath::Blas && isa != cpu_max_isa()) continue;  // one BLAS run
            if (!quick || M == 64) bench_gemm(pool, l, M, isa, p, bw, min_s, rng);
          }
  }
  if (wanted("stream")) {
    CpuBackend be(&pool);
    for (int64_t M : {1, 4, 16})
      for (CpuIsa isa : isas)
        for (DType d : {DType::BF16, DType::F8E4M3})
          bench_decode_stream(pool, be, isa, M, d, bw, min_s, rng);
  }
  if (wanted("attention"))
    for (CpuIsa isa : isas) {
      CpuBackend be(&pool, isa);
      fmt::print("attention kernels: {}\n", cpu_isa_name(isa));
      for (auto [rows, context, tokens] : {std::tuple{1, 192, 1}, {16, 192, 1}, {16, 1024, 1},
                                           {1, 512, 512}, {16, 128, 128}})
        bench_attention(be, rows, context, tokens, bw, min_s);
    }
  return 0;
}
