#include "kv/kv_groups.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace tandem {

namespace {

// How far back a layer sees, with full attention as "everything".
int64_t reach(int window) {
  return window > 0 ? window : INT64_MAX;
}

// The distinct windows of the storage-owning layers: 0 (full) first, then ascending.
std::vector<int> distinct_windows(std::span<const KvLayerKind> layers) {
  std::vector<int> windows;
  for (const KvLayerKind& l : layers)
    if (!l.shares_with) windows.push_back(l.window);
  std::sort(windows.begin(), windows.end());
  windows.erase(std::unique(windows.begin(), windows.end()), windows.end());
  return windows;
}

}  // namespace

KvGroups make_kv_groups(std::span<const KvLayerKind> layers) {
  const int L = int(layers.size());
  TANDEM_CHECK(L > 0, "kv groups: the model has no layers");
  for (int i = 0; i < L; i++) {
    const KvLayerKind& l = layers[size_t(i)];
    TANDEM_CHECK(l.window >= 0, "kv groups: layer {} has window {}", i, l.window);
    if (!l.shares_with) continue;
    const int source = *l.shares_with;
    TANDEM_CHECK(source >= 0 && source < L && source != i && !layers[size_t(source)].shares_with,
                 "kv groups: layer {} reads the KV of layer {}, which does not own KV", i, source);
    const int source_window = layers[size_t(source)].window;
    TANDEM_CHECK(reach(l.window) <= reach(source_window),
                 "kv groups: layer {} (window {}) reads layer {}'s KV, which keeps only a "
                 "window of {}",
                 i, l.window, source, source_window);
  }
  KvGroups out;
  std::vector<int> windows = distinct_windows(layers);
  for (int w : windows) out.groups.push_back({w, {}});
  out.layer_group.assign(size_t(L), 0);
  auto group_of_window = [&](int w) {
    return int(std::lower_bound(windows.begin(), windows.end(), w) - windows.begin());
  };
  for (int i = 0; i < L; i++) {
    const KvLayerKind& l = layers[size_t(i)];
    if (l.shares_with) continue;
    int g = group_of_window(l.window);
    out.layer_group[size_t(i)] = g;
    out.groups[size_t(g)].layers.push_back(i);
  }
  for (int i = 0; i < L; i++) {
    const KvLayerKind& l = layers[size_t(i)];
    if (l.shares_with) out.layer_group[size_t(i)] = out.layer_group[size_t(*l.shares_with)];
  }
  return out;
}

}  // namespace tandem
