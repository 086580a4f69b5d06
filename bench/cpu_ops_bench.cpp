// cpu_ops_bench: GFLOP/s of the CPU backend's linear (OpenBLAS) at decode and prefill
// shapes, and of paged attention at a few contexts. Prints figures; never a gate.
//   usage: cpu_ops_bench [min_seconds_per_case (default 0.3)]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace {

using tandem::Backend;
using tandem::DType;
using tandem::Tensor;

Tensor random_tensor(Backend& be, tandem::Shape shape, std::mt19937& rng) {
  Tensor h = Tensor::empty_host(DType::F32, shape);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < h.numel(); i++) h.ptr<float>()[i] = dist(rng);
  return be.upload(h, DType::F32);
}

// Seconds per call of fn, repeated until min_seconds have passed (after one warm-up).
double time_per_call(const std::function<void()>& fn, double min_seconds) {
  using clock = std::chrono::steady_clock;
  fn();
  int calls = 0;
  const auto start = clock::now();
  double elapsed = 0;
  do {
    fn();
    calls++;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_seconds);
  return elapsed / calls;
}

void bench_linear(Backend& be, int64_t T, int64_t K, int64_t N, double min_s, std::mt19937& rng) {
  Tensor x = random_tensor(be, {T, K}, rng), w = random_tensor(be, {N, K}, rng);
  Tensor out = be.alloc(DType::F32, {T, N});
  const double s = time_per_call([&] { be.linear(out, x, tandem::Linear{w}); }, min_s);
  fmt::print("linear     T={:<4} K={:<5} N={:<5} {:9.1f} us  {:7.2f} GFLOP/s\n", T, K, N, s * 1e6,
             2.0 * T * K * N / s * 1e-9);
}

// One decode token per row over `context` cached positions each.
void bench_attention(Backend& be, int rows, int context, double min_s, std::mt19937& rng) {
  const int Hq = 12, Hkv = 4, Dh = 64, bs = 16, per_row = (context + bs - 1) / bs;
  tandem::PagedKv cache{random_tensor(be, {rows * per_row, bs, Hkv, Dh}, rng),
                        random_tensor(be, {rows * per_row, bs, Hkv, Dh}, rng)};
  std::vector<int32_t> pos, starts{0}, ctx, table, slots;
  for (int b = 0; b < rows; b++) {
    pos.push_back(context - 1);
    starts.push_back(b + 1);
    ctx.push_back(context);
    for (int i = 0; i < per_row; i++) table.push_back(b * per_row + i);
    slots.push_back(table[size_t(b * per_row + (context - 1) / bs)] * bs + (context - 1) % bs);
  }
  auto i32 = [&](const std::vector<int32_t>& v, tandem::Shape shape) {
    Tensor t = be.alloc(DType::I32, shape);
    be.write_i32(t, v.data(), int64_t(v.size()));
    return t;
  };
  tandem::StepTensors step;
  step.num_tokens = rows;
  step.num_rows = rows;
  step.max_context_len = context;
  step.block_size = bs;
  step.positions = i32(pos, {rows});
  step.seq_starts = i32(starts, {rows + 1});
  step.context_lens = i32(ctx, {rows});
  step.groups = {{i32(slots, {rows}), i32(table, {rows, per_row}), per_row}};
  Tensor q = random_tensor(be, {rows, Hq, Dh}, rng), out = be.alloc(DType::F32, {rows, Hq, Dh});
  tandem::AttentionParams params{0.125f, 0.f, 0};
  const double s = time_per_call([&] { be.attention(out, q, cache, step, params); }, min_s);
  fmt::print("attention  B={:<4} ctx={:<5}        {:9.1f} us  {:7.2f} GFLOP/s\n", rows, context,
             s * 1e6, 4.0 * rows * Hq * context * Dh / s * 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  const double min_s = argc > 1 ? std::atof(argv[1]) : 0.3;
  auto be = tandem::make_cpu_backend();
  std::mt19937 rng(0);
  struct Shape3 {
    int64_t T, K, N;
  };
  for (Shape3 s : {Shape3{1, 768, 768},
                   {1, 768, 3072},
                   {1, 4096, 4096},
                   {8, 768, 3072},
                   {64, 768, 768},
                   {128, 768, 3072},
                   {512, 2048, 2048}})
    bench_linear(*be, s.T, s.K, s.N, min_s, rng);
  for (auto [rows, context] : {std::pair{1, 512}, {8, 512}, {32, 2048}})
    bench_attention(*be, rows, context, min_s, rng);
  return 0;
}
