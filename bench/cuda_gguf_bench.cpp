// cuda_gguf_bench: CUDA linears with ggml block-type weights (cuda_block_linear.cu) against
// bf16, at Llama-3.1-8B's layer shapes (qkv 6144x4096, o 4096x4096, gate_up 28672x4096, down
// 4096x14336), 1 / 4 / 8 rows (the weight stream), 16 / 64 (the shared-memory tiles) and 512
// (the decoded bf16 copy + cuBLASLt). Each figure is one layer's four linears timed with CUDA
// events (the median of repetitions of a CUDA graph of several layers over distinct weight
// copies, more bytes than L2 holds); GB/s counts the weight bytes read. Never a gate.
// Block types at 9-64 rows (kBlockTilesMaxRows) are timed on both many-row routes, the
// decoded copy ("copy", TANDEM_GGUF_TILES=0) and the tiles ("tiles", the default;
// cuda_block_tiles.cu), the tiles with their outputs' max relative difference from the copy's.
//   usage: cuda_gguf_bench [types (default bf16,q4_k,q8_0)] [rows (default 1,4,8,16,64,512)]
// With "moe" first, one Qwen3-30B-A3B MoE layer's experts (128 of 768 x 2048, top-8, random
// routing) through moe_experts, tokens = rows, on the wmma kernels ("wmma", the fallback,
// TANDEM_GGUF_MOE_TILES=0) and the shared-memory tiles ("tiles", the default;
// cuda_moe_block_tiles.cu) with their outputs' max relative difference from the wmma
// kernels'; GB/s counts the weight bytes of the experts the routing touches.
//   usage: cuda_gguf_bench moe [types (default q4_k,q6_k,q8_0)] [rows (default 1,8,64,256)]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#ifdef TANDEM_HAS_CUDA
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_tiles.h"
#include "backend/gguf_tiles.h"
#include "core/block_quant.h"
#include "core/error.h"
#include "cuda_timing.h"

namespace {

using namespace tandem;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

DType dtype_named(const std::string& name) {
  for (int d = 0; d <= int(DType::IQ4_XS); d++)
    if (dtype_name(DType(d)) == name) return DType(d);
  fmt::print(stderr, "cuda_gguf_bench: unknown type {}\n", name);
  std::exit(2);
}

// A [N, K] weight of random normals in dtype (bf16 unless a block type), on the host.
Tensor host_weight(DType dtype, int64_t N, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.02f);
  std::vector<float> row(static_cast<size_t>(K));
  Tensor host = Tensor::empty_host(dtype_is_block(dtype) ? dtype : DType::BF16, {N, K});
  const size_t row_bytes = dtype_row_bytes(host.dtype, K);
  for (int64_t n = 0; n < N; n++) {
    for (float& v : row) v = dist(rng);
    uint8_t* dst = host.ptr<uint8_t>() + size_t(n) * row_bytes;
    if (dtype_is_block(dtype))
      quantize_row(dtype, row.data(), dst, K);
    else
      convert_from_f32(row.data(), dst, DType::BF16, size_t(K));
  }
  return host;
}

// The same on the GPU.
Tensor weight(CudaBackend& be, DType dtype, int64_t N, int64_t K, std::mt19937& rng) {
  const Tensor host = host_weight(dtype, N, K, rng);
  return be.upload(host, host.dtype);
}

// A host tensor of `v` as `dtype` (f32, bf16 or i32 values given as floats / ints).
template <typename V>
Tensor host_of(const std::vector<V>& v, Shape shape, DType dtype) {
  Tensor host = Tensor::empty_host(dtype, shape);
  if constexpr (std::is_same_v<V, float>)
    convert_from_f32(v.data(), host.data, dtype, v.size());
  else
    std::memcpy(host.data, v.data(), v.size() * sizeof(V));
  return host;
}

// The many-row routes timed for dtype at M rows; the first (the copy) is the diffs' reference.
std::vector<bool> tiles_routes(DType dtype, int64_t M) {
  if (dtype_is_block(dtype) && M > 8 && M <= kBlockTilesMaxRows) return {false, true};
  return {false};
}

// One layer's outputs in f32, each linear on the route in force.
std::vector<float> layer_outputs(CudaBackend& be, const std::vector<Linear>& layer,
                                 const std::vector<Tensor>& xs) {
  std::vector<float> all;
  for (size_t i = 0; i < layer.size(); i++) {
    Tensor out = be.alloc(DType::F32, {xs[i].rows(), layer[i].weight.dim(0)});
    be.linear(out, xs[i], layer[i]);
    const Tensor host = be.to_host_f32(out);
    all.insert(all.end(), host.ptr<float>(), host.ptr<float>() + host.numel());
  }
  return all;
}

// max |got − ref| / max |ref|
double max_rel_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0.0, mag = 0.0;
  for (size_t i = 0; i < ref.size(); i++) {
    diff = std::max(diff, std::fabs(double(got[i]) - double(ref[i])));
    mag = std::max(mag, std::fabs(double(ref[i])));
  }
  return mag > 0.0 ? diff / mag : diff;
}

// One MoE layer: the stacked experts and its routed tokens.
struct MoeLayer {
  Linear gate_up, down;  // [E, 2F, D], [E, D, F]
};

// A stack of E experts of [N, K] (random normals; 8 distinct experts repeated, which reads
// the same bytes from HBM as E distinct ones and quantizes 16x faster).
Tensor expert_stack(CudaBackend& be, DType dtype, int64_t E, int64_t N, int64_t K,
                    std::mt19937& rng) {
  constexpr int64_t kDistinct = 8;
  const Tensor some = host_weight(dtype, kDistinct * N, K, rng);
  Tensor host = Tensor::empty_host(dtype, {E, N, K});
  const size_t bytes = some.nbytes() / kDistinct;
  for (int64_t e = 0; e < E; e++)
    std::memcpy(host.ptr<uint8_t>() + size_t(e) * bytes,
                some.ptr<uint8_t>() + size_t(e % kDistinct) * bytes, bytes);
  return be.upload(host, dtype);
}

void run_moe(CudaBackend& be, const std::vector<std::string>& types,
             const std::vector<int64_t>& rows) {
  constexpr int64_t E = 128, k = 8, D = 2048, F = 768;
  std::mt19937 rng(0);
  for (const std::string& name : types) {
    const DType dtype = dtype_named(name);
    if (!dtype_is_block(dtype)) {
      fmt::print("moe {}: not a block type\n", name);
      continue;
    }
    std::vector<MoeLayer> layers;
    size_t layer_bytes = 0;
    for (int copy = 0; copy < 2 || layer_bytes * size_t(copy) < (size_t(512) << 20); copy++) {
      MoeLayer l{Linear{expert_stack(be, dtype, E, 2 * F, D, rng)},
                 Linear{expert_stack(be, dtype, E, D, F, rng)}};
      layer_bytes = l.gate_up.weight.nbytes() + l.down.weight.nbytes();
      layers.push_back(l);
    }
    for (const int64_t T : rows) {
      std::vector<int32_t> ids;
      std::vector<float> x(size_t(T * D));
      std::normal_distribution<float> dist(0.f, 1.f);
      for (float& v : x) v = dist(rng);
      std::vector<bool> touched(E, false);
      for (int64_t t = 0; t < T; t++) {
        std::vector<int32_t> all(E);
        for (int32_t e = 0; e < E; e++) all[size_t(e)] = e;
        std::shuffle(all.begin(), all.end(), rng);
        ids.insert(ids.end(), all.begin(), all.begin() + k);
        for (int64_t j = 0; j < k; j++) touched[size_t(all[size_t(j)])] = true;
      }
      const double bytes =
          double(layer_bytes) * double(std::count(touched.begin(), touched.end(), true)) / E;
      const Tensor xt = be.upload(host_of(x, {T, D}, DType::BF16), DType::BF16);
      const Tensor idt = be.upload(host_of(ids, {T, k}, DType::I32), DType::I32);
      const std::vector<float> w(size_t(T * k), 1.f / k);
      const Tensor wt = be.upload(host_of(w, {T, k}, DType::F32), DType::F32);
      Tensor out = be.alloc(DType::BF16, {T, D});
      auto run = [&](const MoeLayer& l) {
        be.moe_experts(out, xt, wt, idt, l.gate_up, l.down, Activation::SiLU);
      };
      std::vector<float> ref;
      for (const bool tiles : {false, true}) {
        set_gguf_moe_tiles(tiles);
        const bench::Timing t = bench::time_graph(be, 1, [&] {
          for (const MoeLayer& l : layers) run(l);
        });
        const double per_layer = t.event_s / double(layers.size());
        fmt::print("moe {:<5} T={:<4} {:<5} layer {:8.1f} us  {:7.1f} GB/s of touched experts",
                   name, T, tiles ? "tiles" : "wmma", per_layer * 1e6, bytes / per_layer * 1e-9);
        run(layers[0]);
        const Tensor host = be.to_host_f32(out);
        const std::vector<float> got(host.ptr<float>(), host.ptr<float>() + host.numel());
        if (tiles) fmt::print("  max rel diff from wmma {:.2e}", max_rel_diff(got, ref));
        ref = got;
        fmt::print("\n");
      }
      set_gguf_moe_tiles(true);  // the default again
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool moe = argc > 1 && std::string(argv[1]) == "moe";
  if (moe) argv++, argc--;
  const std::vector<std::string> types = split(argc > 1 ? argv[1]
                                               : moe    ? "q4_k,q6_k,q8_0"
                                                        : "bf16,q4_k,q8_0");
  std::vector<int64_t> rows;
  for (const std::string& r : split(argc > 2 ? argv[2] : moe ? "1,8,64,256" : "1,4,8,16,64,512"))
    rows.push_back(std::atoll(r.c_str()));
  if (cuda_device_count() == 0) return fmt::print("no CUDA GPU\n"), 0;
  CudaBackend be(0);
  if (moe) return run_moe(be, types, rows), 0;
  const std::pair<int64_t, int64_t> shapes[] = {
      {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
  std::mt19937 rng(0);
  for (const std::string& name : types) {
    const DType dtype = dtype_named(name);
    // Enough layer copies for > 512 MB of weights, so L2 never holds the next call's.
    std::vector<std::vector<Linear>> layers;
    size_t layer_bytes = 0;
    for (int copy = 0; copy < 2 || layer_bytes * size_t(copy) < (size_t(512) << 20); copy++) {
      layers.emplace_back();
      layer_bytes = 0;
      for (auto [N, K] : shapes) {
        Linear l;
        l.weight = weight(be, dtype, N, K, rng);
        layer_bytes += l.weight.nbytes();
        layers.back().push_back(l);
      }
    }
    for (int64_t M : rows) {
      // Inputs [M, K] and outputs [M, N] per shape (random x: the integer path's scales vary).
      std::vector<Tensor> xs, outs;
      std::normal_distribution<float> dist(0.f, 1.f);
      for (auto [N, K] : shapes) {
        Tensor hx = Tensor::empty_host(DType::BF16, {M, K});
        std::vector<float> v(size_t(M * K));
        for (float& f : v) f = dist(rng);
        convert_from_f32(v.data(), hx.data, DType::BF16, v.size());
        xs.push_back(be.upload(hx, DType::BF16));
        outs.push_back(be.alloc(DType::BF16, {M, N}));
      }
      auto call = [&](size_t i, const Linear& l) { be.linear(outs[i], xs[i], l); };
      auto step = [&] {
        for (const auto& layer : layers)
          for (size_t i = 0; i < layer.size(); i++) call(i, layer[i]);
      };
      const std::vector<bool> routes = tiles_routes(dtype, M);
      std::vector<float> ref;  // the copy's outputs, when the tiles are timed too
      if (routes.size() > 1) {
        set_gguf_tiles(false);
        ref = layer_outputs(be, layers[0], xs);
      }
      for (const bool tiles : routes) {
        set_gguf_tiles(tiles);
        const bench::Timing t = bench::time_graph(be, 1, step);
        const double per_layer = t.event_s / double(layers.size());
        const char* route = tiles ? "tiles" : dtype_is_block(dtype) && M > 8 ? "copy" : "";
        fmt::print("{:<5} M={:<4} {:<5} layer {:8.1f} us  {:7.1f} GB/s of weights  {:8.1f} TFLOP/s",
                   name, M, route, per_layer * 1e6, double(layer_bytes) / per_layer * 1e-9,
                   2.0 * double(M) * (6144 + 4096 + 28672 + 14336) * 4096.0 / per_layer * 1e-12);
        if (tiles)
          fmt::print("  max rel diff from copy {:.2e}", max_rel_diff(layer_outputs(be, layers[0], xs), ref));
        fmt::print("\n");
      }
      set_gguf_tiles(true);  // the default again
    }
  }
  return 0;
}

#else
int main() {
  std::puts("cuda_gguf_bench: built without CUDA");
  return 0;
}
#endif
