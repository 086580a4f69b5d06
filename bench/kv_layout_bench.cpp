// kv_layout_bench: KV bytes per token of context for a Gemma-4-like shape, heterogeneous
// layout (KV groups, per-layer head dims, sliding-window blocks released) versus a naive
// one-size-fits-all layout (every layer full attention at the largest head geometry).
//   kv_layout_bench            (no arguments; nothing is loaded, nothing runs on a device)
// The heterogeneous figures are measured, not computed from a formula: one sequence is
// driven through the real KvBlockManager (chunked prefill of 2048 tokens a step, then
// decode) and the blocks it holds are counted.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/kv_layout.h"

using namespace tandem;

namespace {

constexpr int kBlock = 16, kStep = 2048;
constexpr DType kDtype = DType::BF16;

struct ModelShape {
  std::string name;
  std::vector<LayerKvSpec> layers;
};

// Gemma 4 defaults (configuration_gemma4.py): 5 sliding layers to 1 full one, the last one
// full; sliding layers 4 kv heads × 256, full layers 4 kv heads × global_head_dim 512
// (num_global_key_value_heads unset); a 12B-ish depth of 48 layers, window 1024.
// `shared` last layers read the KV of the last earlier layer of their own kind.
ModelShape gemma4_like(int num_layers, int window, int shared) {
  ModelShape s;
  s.name = fmt::format("gemma4-like L={} window={}{}", num_layers, window,
                       shared ? fmt::format(" shared={} (illustrative)", shared) : "");
  for (int i = 0; i < num_layers; i++) {
    bool full = (i + 1) % 6 == 0 || i == num_layers - 1;
    s.layers.push_back(full ? LayerKvSpec{4, 512, 0} : LayerKvSpec{4, 256, window});
  }
  for (int i = num_layers - shared; i < num_layers; i++)
    for (int j = num_layers - shared - 1; j >= 0; j--)
      if (s.layers[size_t(j)].window == s.layers[size_t(i)].window) {
        s.layers[size_t(i)].shares_with = j;
        break;
      }
  return s;
}

// Naive layout: one K and one V per layer at the largest kv heads × head dim, no
// windows, no sharing.
int64_t naive_bytes_per_token(const ModelShape& s) {
  int64_t heads = 0, dim = 0;
  for (auto& l : s.layers) {
    heads = std::max<int64_t>(heads, l.num_kv_heads);
    dim = std::max<int64_t>(dim, l.head_dim);
  }
  return int64_t(s.layers.size()) * 2 * heads * dim * int64_t(dtype_size(kDtype));
}

// Own head dims and sharing, but every layer keeps every token.
int64_t per_layer_bytes_per_token(const ModelShape& s) {
  int64_t bytes = 0;
  for (auto& l : s.layers)
    if (!l.shares_with) bytes += 2 * int64_t(l.num_kv_heads) * l.head_dim * dtype_size(kDtype);
  return bytes;
}

struct Held {
  int64_t at_rest = 0;  // bytes held between steps at the full context
  int64_t peak = 0;     // most bytes held during any step (window + a chunk in flight)
};

// Drives one sequence to `context` tokens through the manager the engine would build.
Held measure(const ModelShape& s, int context) {
  KvSizing sizing;
  sizing.block_size = kBlock;
  sizing.max_rows = 1;
  sizing.max_batched_tokens = kStep;
  sizing.max_model_len = context + 1;
  KvBlockManager kv = make_kv_block_manager(s.layers, kDtype, sizing);
  std::vector<int64_t> bytes = group_block_bytes(s.layers, kv.groups(), kBlock, kDtype);
  auto held = [&] {
    int64_t total = 0;
    for (int g = 0; g < kv.num_groups(); g++) total += kv.pool(g).num_used() * bytes[size_t(g)];
    return total;
  };
  Held h;
  BlockTables t;
  int prompt = context - 64;
  for (int nc = 0; nc < context;) {
    kv.release_out_of_window(t, nc);
    int n = nc < prompt ? std::min(kStep, prompt - nc) : 1;
    kv.apply(t, kv.plan_grow(t, nc, nc + n, nc == 0 ? prompt : 0).value());
    h.peak = std::max(h.peak, held());
    nc += n;
  }
  kv.release_out_of_window(t, context);
  h.at_rest = held();
  kv.release(t);
  return h;
}

void print_shape(const ModelShape& s) {
  fmt::print("\n{}  ({} layers, K+V in bf16, blocks of {} tokens)\n", s.name, s.layers.size(),
             kBlock);
  fmt::print("{:>8} | {:>14} | {:>16} | {:>16} | {:>14} | {:>8}\n", "context", "naive B/tok",
             "own dims B/tok", "groups B/tok", "groups peak", "naive/grp");
  int64_t naive = naive_bytes_per_token(s), own = per_layer_bytes_per_token(s);
  for (int context : {8192, 32768}) {
    Held h = measure(s, context);
    double at_rest = double(h.at_rest) / context, peak = double(h.peak) / context;
    fmt::print("{:>8} | {:>14} | {:>16} | {:>16.0f} | {:>14.0f} | {:>7.2f}x\n", context, naive, own,
               at_rest, peak, double(naive) / at_rest);
  }
}

// What a server pool sized by the engine takes for `rows` full-length rows.
void print_pool(const ModelShape& s, int rows, int context) {
  KvSizing sizing;
  sizing.block_size = kBlock;
  sizing.max_rows = rows;
  sizing.max_batched_tokens = kStep;
  sizing.max_model_len = context;
  double gib = double(1 << 30);
  double grouped = double(planned_kv_bytes(s.layers, kDtype, sizing)) / gib;
  double naive = double(naive_bytes_per_token(s)) * rows * context / gib;
  fmt::print("pool for --batch {} at {} tokens: naive {:.2f} GiB, groups {:.2f} GiB ({:.2f}x)\n",
             rows, context, naive, grouped, naive / grouped);
}

}  // namespace

int main() {
  fmt::print(
      "KV bytes per token of context (one sequence; 'groups' = full group + window\n"
      "group, sliding blocks released once every later query is past them)\n");
  for (const ModelShape& s : {gemma4_like(48, 1024, 0), gemma4_like(48, 1024, 16)}) {
    print_shape(s);
    print_pool(s, 8, 32768);
  }
  return 0;
}
