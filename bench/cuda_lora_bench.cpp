// cuda_lora_bench: LoRA's two products of one projection (CudaBackend::lora_add) for the
// projections of a Llama-3.1-8B layer, 8 rank-16 adapters on every projection (the issue-23
// figure's setup), at 1, 8, 64 and 256 tokens spread evenly over the adapters; beside the
// base linear of the same step, which the adapters ride on. Each figure is the median over
// repetitions of one CUDA graph of `calls` back-to-back calls, timed with CUDA events; the
// calls cycle over copies of the banks and weights that add up to more than L2 holds, as the
// 32 layers of a step do. GB/s counts the bytes of A and B the step's adapters need (the
// nonzero blocks of a fused projection's B). Prints figures; never a gate.
//   usage: cuda_lora_bench [calls_per_graph (default 20)] [tokens: only this count]
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#ifdef TANDEM_HAS_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/step_tensors.h"
#include "cuda_timing.h"

namespace {

using tandem::DType;
using tandem::Tensor;

constexpr int kAdapters = 8, kRank = 16;
constexpr int64_t kMinBytes = int64_t(512) << 20;  // ten times the H200's L2

struct Case {
  const char* name;
  int64_t N, K;
  std::vector<int64_t> shard_ends;  // empty: not fused
};

Tensor filled(tandem::CudaBackend& be, tandem::Shape shape) {
  Tensor t = be.alloc(DType::BF16, shape);
  tandem::cuda_check(cudaMemsetAsync(t.data, 0x3c, size_t(t.numel() * 2), be.stream()),
                     "cudaMemsetAsync");
  return t;
}

void bench_case(tandem::CudaBackend& be, const Case& c, int calls, int64_t only_T) {
  const int64_t shards = std::max<int64_t>(1, int64_t(c.shard_ends.size()));
  const int64_t R = kRank * shards, S = kAdapters + 1;
  const int64_t bank_bytes = S * (R * c.K + c.N * R) * 2, w_bytes = c.N * c.K * 2;
  const int64_t copies = std::max<int64_t>(2, kMinBytes / (bank_bytes + w_bytes) + 1);
  std::vector<tandem::LinearLora> banks;
  std::vector<Tensor> weights;
  for (int64_t i = 0; i < copies; i++) {
    banks.push_back({filled(be, {S, R, c.K}), filled(be, {S, c.N, R}), c.shard_ends});
    weights.push_back(filled(be, {c.N, c.K}));
  }
  for (int64_t T : {1, 8, 64, 256}) {
    if (only_T > 0 && T != only_T) continue;
    Tensor x = filled(be, {T, c.K});
    Tensor out = filled(be, {T, c.N});
    std::vector<int32_t> slots;
    for (int64_t t = 0; t < T; t++) slots.push_back(int32_t(1 + t % kAdapters));
    tandem::LoraRows rows{be.alloc(DType::I32, {T}), be.alloc(DType::I32, {T}),
                          be.alloc(DType::I32, {T}), be.alloc(DType::I32, {1}),
                          be.alloc(DType::I32, {1 + tandem::kLoraTileInts * T})};
    tandem::write_lora_rows(be, rows, slots);
    const int64_t used = std::min<int64_t>(T, kAdapters);
    const double need = double(used * (R * c.K + c.N * kRank) * 2);
    size_t next = 0;
    const double lora_us = 1e6 * tandem::bench::time_graph(be, calls, [&] {
                             be.lora_add(out, x, banks[next++ % banks.size()], rows);
                           }).event_s;
    next = 0;
    const double base_us = 1e6 * tandem::bench::time_graph(be, calls, [&] {
                             be.linear(out, x, tandem::Linear{weights[next++ % weights.size()]});
                           }).event_s;
    fmt::print("{:<8} T={:<4} lora_add {:7.1f} µs ({:6.0f} GB/s of A and B)   base linear "
               "{:7.1f} µs   lora/base {:4.2f}\n",
               c.name, T, lora_us, need / (lora_us * 1e-6) / 1e9, base_us, lora_us / base_us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (tandem::cuda_device_count() == 0) {
    std::fprintf(stderr, "cuda_lora_bench: no CUDA GPU on this machine\n");
    return 1;
  }
  const int calls = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const int64_t only_T = argc > 2 ? std::atoll(argv[2]) : 0;  // one token count (a profiler run)
  tandem::CudaBackend be(0);
  fmt::print("LoRA per projection, {} adapters of rank {}, graph of {} calls\n", kAdapters, kRank,
             calls);
  const Case cases[] = {{"qkv", 6144, 4096, {4096, 5120, 6144}},
                        {"o", 4096, 4096, {}},
                        {"gate_up", 28672, 4096, {14336, 28672}},
                        {"down", 4096, 14336, {}}};
  for (const Case& c : cases) bench_case(be, c, calls, only_T);
  return 0;
}

#else
int main() {
  std::fprintf(stderr, "cuda_lora_bench: built without CUDA\n");
  return 1;
}
#endif
