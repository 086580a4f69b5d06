// cuda_attention_bench: paged attention on the GPU through the Backend interface.
// Decode (one token per row over a long context): achieved GB/s of K+V read, against the
// H200's measured 4.3 TB/s. Prefill (rows of fresh causal tokens): TFLOP/s counted as
// 4·Σ(visible query-key pairs)·Dh·Hq. Each figure is the median over repetitions of a
// batch of calls timed with CUDA events on the backend's stream; the host clock (through
// backend.synchronize()) is printed next to it. Rows marked "graph replay" capture the
// batch of calls in one CUDA graph and time its replays, as a decode step runs (small
// shapes timed eagerly measure the host's launch rate as much as the GPU). Prints
// figures; never a gate.
// Prefill rows print once per kernel (sm90 = the wgmma kernel, where the device runs it;
// mma = the mma.sync kernel), on the same inputs.
//   usage: cuda_attention_bench [calls_per_repetition (default 20)] [f8 | prefill-long]
//   prefill-long: issue 26's shapes alone (8k, 32k, 128k tokens, one sequence, 32/8 heads)
//   prefill-short: its 8k and 32k shapes; prefill-short-sm90: those, the sm90 kernel alone
//     (scripts/gpu_attn.sh short); prefill-long-sm90: all three, the sm90 kernel alone
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#ifdef TANDEM_HAS_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_attention_prefill.h"
#include "backend/cuda/cuda_backend.h"
#include "cli/env_switches.h"
#include "cuda_timing.h"

namespace {

using tandem::Backend;
using tandem::DType;
using tandem::Tensor;
using tandem::bench::time_calls;
using tandem::bench::time_graph;
using tandem::bench::Timing;

constexpr double kMeasuredHbm = 4.3e12;  // bytes/s, H200 copy bandwidth measured

struct Shape {
  int rows, context, new_tokens;  // every row: `new_tokens` tokens ending at `context`
  int Hq, Hkv, Dh;
  int capacity = 0;    // >0: max_context_len and table width of a replayed CUDA graph
  bool graph = false;  // time replays of a graph of the calls, not eager calls
  bool f8 = false;     // an f8_e4m3 cache (half the bytes of bf16)
};

// A device tensor of cheap pseudo-random values (timing does not depend on them): element
// i holds code(x_i) for an xorshift stream x, so no gigabyte of f32 is converted on the host.
template <typename Bits, class Code>
Tensor random_device(Backend& be, DType dtype, tandem::Shape shape, uint32_t seed, Code code) {
  Tensor h = Tensor::empty_host(dtype, shape);
  Bits* p = h.ptr<Bits>();
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < h.numel(); i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    p[i] = code(x);
  }
  return be.upload(h, dtype);
}

// bf16 values in [-1, 1).
Tensor random_bf16(Backend& be, tandem::Shape shape, uint32_t seed) {
  return random_device<uint16_t>(be, DType::BF16, shape, seed, [](uint32_t x) {
    return tandem::f32_to_bf16(float(x >> 8) * (2.f / 16777216.f) - 1.f);
  });
}

// Finite f8_e4m3 codes with |value| < 1: the exponent field is at most 0b0110, so the
// NaN codes 0x7f / 0xff never occur.
Tensor random_f8(Backend& be, tandem::Shape shape, uint32_t seed) {
  return random_device<uint8_t>(be, DType::F8E4M3, shape, seed,
                                [](uint32_t x) { return uint8_t((x >> 8) & 0xb7); });
}

Tensor device_i32(Backend& be, const std::vector<int32_t>& v, tandem::Shape shape) {
  Tensor t = be.alloc(DType::I32, shape);
  be.write_i32(t, v.data(), int64_t(v.size()));
  return t;
}

// Rows with shuffled block tables, the step's new tokens at the end of each context.
tandem::StepTensors make_step(Backend& be, const Shape& s, int block_size, std::mt19937& rng) {
  const int per_row = (s.context + block_size - 1) / block_size;
  const int width = std::max(per_row, s.capacity / block_size);  // table columns
  std::vector<int32_t> ids(size_t(s.rows) * per_row);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> table(size_t(s.rows) * width, -1);
  for (int b = 0; b < s.rows; b++)
    std::copy_n(ids.begin() + long(b) * per_row, per_row, table.begin() + long(b) * width);
  std::vector<int32_t> pos, slots, starts{0}, ctx;
  for (int b = 0; b < s.rows; b++) {
    for (int p = s.context - s.new_tokens; p < s.context; p++) {
      pos.push_back(p);
      slots.push_back(ids[size_t(b) * per_row + p / block_size] * block_size + p % block_size);
    }
    starts.push_back(int32_t(pos.size()));
    ctx.push_back(s.context);
  }
  tandem::StepTensors st;
  st.num_tokens = int(pos.size());
  st.num_rows = s.rows;
  st.max_context_len = std::max(s.context, s.capacity);
  st.block_size = block_size;
  st.positions = device_i32(be, pos, {int64_t(pos.size())});
  st.seq_starts = device_i32(be, starts, {int64_t(starts.size())});
  st.context_lens = device_i32(be, ctx, {int64_t(ctx.size())});
  st.groups = {{device_i32(be, slots, {int64_t(slots.size())}),
                device_i32(be, table, {s.rows, width}), width}};
  return st;
}

// One shape's device inputs: a random cache, the step, q and out.
struct AttnInputs {
  tandem::PagedKv cache;
  tandem::StepTensors step;
  Tensor q, out;
};

AttnInputs make_inputs(tandem::CudaBackend& be, const Shape& s) {
  constexpr int kBlockSize = 16;
  std::mt19937 rng(11);
  const int64_t blocks = int64_t(s.rows) * ((s.context + kBlockSize - 1) / kBlockSize);
  const tandem::Shape kv_shape{blocks, kBlockSize, s.Hkv, s.Dh};
  AttnInputs in;
  in.cache = s.f8 ? tandem::PagedKv{random_f8(be, kv_shape, 1), random_f8(be, kv_shape, 2)}
                  : tandem::PagedKv{random_bf16(be, kv_shape, 1), random_bf16(be, kv_shape, 2)};
  in.step = make_step(be, s, kBlockSize, rng);
  const int64_t T = in.step.num_tokens;
  in.q = random_bf16(be, {T, s.Hq, s.Dh}, 3);
  in.out = be.alloc(DType::BF16, {T, s.Hq, s.Dh});
  return in;
}

Timing time_inputs(tandem::CudaBackend& be, AttnInputs& in, const Shape& s, int calls) {
  const tandem::AttentionParams params{1.f / std::sqrt(float(s.Dh)), 0.f, 0};
  const auto call = [&] { be.attention(in.out, in.q, in.cache, in.step, params); };
  return s.graph ? time_graph(be, calls, call) : time_calls(be, calls, call);
}

// Times attention over one shape; returns the timing (the cache is freed on return).
Timing time_attention(tandem::CudaBackend& be, const Shape& s, int calls) {
  AttnInputs in = make_inputs(be, s);
  return time_inputs(be, in, s, calls);
}

void bench_decode(tandem::CudaBackend& be, const Shape& s, int calls) {
  const Timing t = time_attention(be, s, calls);
  const double bytes = 2.0 * s.rows * s.context * s.Hkv * s.Dh * (s.f8 ? 1 : 2);  // K and V
  fmt::print(
      "decode{} B={:<4} ctx={:<6} Hq={:<3} Hkv={:<2} Dh={:<4} {:9.1f} us {:9.1f} us  "
      "{:7.0f} GB/s  {:5.1f}% of 4.3 TB/s{}{}\n",
      s.f8 ? "-f8" : "   ", s.rows, s.context, s.Hq, s.Hkv, s.Dh, t.event_s * 1e6, t.host_s * 1e6,
      bytes / t.event_s * 1e-9, 100 * bytes / t.event_s / kMeasuredHbm,
      s.capacity > 0 ? fmt::format("  (graph capacity {})", s.capacity) : "",
      s.graph ? "  graph replay" : "");
}

// Prefill on the same inputs with each kernel the device can run (CudaOptions::sm90_prefill
// on and off: cuda_attention_prefill.h; TANDEM_ATTN_PREFILL=mma leaves the mma kernel's
// alone), one line each.
void bench_prefill(tandem::CudaBackend& be, const Shape& s, int calls, bool only_sm90 = false) {
  AttnInputs in = make_inputs(be, s);
  const int64_t n = s.new_tokens, first = s.context - n;
  const double pairs = double(s.rows) * (double(n) * first + double(n) * (n + 1) / 2);
  const double flops = 4.0 * pairs * s.Dh * s.Hq;
  const tandem::CudaOptions saved = be.options();
  for (bool sm90 : {true, false}) {
    tandem::CudaOptions options = saved;
    options.sm90_prefill = sm90;
    be.set_options(options);
    const tandem::cuda::PrefillKernel k =
        tandem::cuda::choose_prefill_kernel(s.Dh, s.f8, be.props(), sm90);
    // One line where the sm90 kernel does not run (TANDEM_ATTN_PREFILL=mma, other GPUs).
    if (sm90 && (!saved.sm90_prefill || k != tandem::cuda::PrefillKernel::Sm90)) continue;
    if (!sm90 && only_sm90) continue;
    const Timing t = time_inputs(be, in, s, calls);
    // The sm90 kernel names its producer.
    const int64_t slots = in.cache.k.dim(0) * in.cache.k.dim(1);
    const std::string name =
        k == tandem::cuda::PrefillKernel::Sm90
            ? fmt::format("sm90 {}", tandem::cuda::sm90_loads_name(tandem::cuda::choose_sm90_loads(
                                         s.f8, s.Dh, int(in.cache.k.dim(1)), slots)))
            : tandem::cuda::prefill_kernel_name(k);
    fmt::print(
        "prefill{} B={:<4} tok={:<6} Hq={:<3} Hkv={:<2} Dh={:<4} {:9.1f} us {:9.1f} us  "
        "{:7.1f} TFLOP/s  {}\n",
        s.f8 ? "-f8" : "   ", s.rows, s.new_tokens, s.Hq, s.Hkv, s.Dh, t.event_s * 1e6,
        t.host_s * 1e6, flops / t.event_s * 1e-12, name);
  }
  be.set_options(saved);
}

// Issue 26's shapes: one sequence prefilled from empty, causal, 32 q / 8 kv heads, d128.
void bench_prefill_long(tandem::CudaBackend& be, bool up_to_32k = false, bool only_sm90 = false) {
  for (int n : {8192, 32768, 131072})
    if (!up_to_32k || n <= 32768)
      bench_prefill(be, Shape{1, n, n, 32, 8, 128}, n >= 131072 ? 1 : n >= 32768 ? 2 : 10,
                    only_sm90);
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool only_f8 = mode == "f8";  // the e4m3 cases alone
  if (tandem::cuda_device_count() == 0) {
    std::puts("no CUDA GPU on this machine");
    return 0;
  }
  try {
    auto backend = tandem::make_cuda_backend(0, tandem::cli::env_switches().cuda);
    auto& be = dynamic_cast<tandem::CudaBackend&>(*backend);
    fmt::print("{}: {} SMs\n", be.props().name, be.props().multiProcessorCount);
    fmt::print("kind     shape                                        events/call  host/call\n");
    if (mode.rfind("prefill-", 0) == 0) {
      const bool up_to_32k = mode.rfind("prefill-short", 0) == 0;
      bench_prefill_long(be, up_to_32k, mode.size() > 5 && mode.substr(mode.size() - 5) == "-sm90");
      return 0;
    }
    for (const Shape& s :
         only_f8
             ? std::vector<Shape>{}
             : std::vector<Shape>{
                   Shape{64, 4096, 1, 32, 8, 128}, Shape{256, 1024, 1, 32, 8, 128},
                   Shape{8, 32768, 1, 32, 8, 128}, Shape{1, 8192, 1, 32, 8, 128},
                   Shape{64, 4096, 1, 16, 8, 256}, Shape{64, 4096, 1, 16, 2, 256},
                   Shape{32, 4096, 1, 16, 4, 512}, Shape{64, 4096, 1, 32, 32, 96},
                   Shape{64, 4096, 1, 32, 8, 128, 131072}, Shape{64, 300, 1, 32, 8, 128, 131072},
                   Shape{1, 300, 1, 32, 8, 128, 131072}, Shape{1, 300, 1, 32, 8, 128, 131072, true},
                   Shape{1, 130, 1, 32, 8, 128, 131072, true},
                   Shape{1, 8192, 1, 32, 8, 128, 131072, true},
                   Shape{8, 1000, 1, 32, 8, 128, 131072, true},
                   Shape{64, 300, 1, 32, 8, 128, 131072, true}})
      bench_decode(be, s, calls);
    // The e4m3 cache on the shapes of offline-2048/2048 and of a batch-1 step.
    for (Shape s : {Shape{64, 4096, 1, 32, 8, 128}, Shape{256, 3072, 1, 32, 8, 128},
                    Shape{160, 3072, 1, 32, 8, 128}, Shape{256, 1024, 1, 32, 8, 128},
                    Shape{1, 300, 1, 32, 8, 128, 131072, true}}) {
      s.f8 = true;
      bench_decode(be, s, calls);
    }
    if (only_f8) return 0;
    bench_decode(be, Shape{256, 3072, 1, 32, 8, 128}, calls);
    bench_decode(be, Shape{160, 3072, 1, 32, 8, 128}, calls);
    for (const Shape& s : {Shape{8, 2048, 2048, 32, 8, 128}, Shape{1, 8192, 8192, 32, 8, 128},
                           Shape{4, 4096, 512, 32, 8, 128}, Shape{8, 2048, 2048, 16, 8, 256},
                           Shape{8, 2048, 2048, 32, 8, 64}, Shape{4, 2048, 2048, 16, 4, 512}})
      bench_prefill(be, s, std::max(1, calls / 4));
    for (Shape s : {Shape{8, 2048, 2048, 32, 8, 128}, Shape{4, 4096, 512, 32, 8, 128}}) {
      s.f8 = true;
      bench_prefill(be, s, std::max(1, calls / 4));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_attention_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

#else  // !TANDEM_HAS_CUDA

int main() {
  std::puts("built without CUDA");
  return 0;
}

#endif
