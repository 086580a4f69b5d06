#include "engine/kv_layout.h"

#include <algorithm>
#include <numeric>

#include "backend/backend.h"
#include "core/error.h"
#include "model/config.h"

namespace tandem {

KvGroups kv_groups_of(std::span<const LayerKvSpec> specs) {
  std::vector<KvLayerKind> kinds;
  for (const LayerKvSpec& s : specs) kinds.push_back({s.window, s.shares_with});
  return make_kv_groups(kinds);
}

std::vector<int64_t> group_block_bytes(std::span<const LayerKvSpec> specs, const KvGroups& groups,
                                       int block_size, DType dtype) {
  std::vector<int64_t> bytes(size_t(groups.num_groups()), 0);
  for (int g = 0; g < groups.num_groups(); g++)
    for (int layer : groups.groups[size_t(g)].layers) {
      const LayerKvSpec& s = specs[size_t(layer)];
      bytes[size_t(g)] +=
          2 * int64_t(block_size) * s.num_kv_heads * s.head_dim * int64_t(dtype_size(dtype));
    }
  return bytes;
}

int64_t kv_bytes_per_block(std::span<const LayerKvSpec> specs, int block_size, DType dtype) {
  std::vector<int64_t> bytes = group_block_bytes(specs, kv_groups_of(specs), block_size, dtype);
  return std::accumulate(bytes.begin(), bytes.end(), int64_t(0));
}

std::vector<int> plan_kv_blocks(std::span<const LayerKvSpec> specs, DType dtype,
                                const KvSizing& sizing) {
  KvGroups groups = kv_groups_of(specs);
  return plan_group_blocks(groups, group_block_bytes(specs, groups, sizing.block_size, dtype),
                           sizing);
}

KvBlockManager make_kv_block_manager(std::span<const LayerKvSpec> specs, DType dtype,
                                     const KvSizing& sizing) {
  return KvBlockManager(kv_groups_of(specs), plan_kv_blocks(specs, dtype, sizing),
                        sizing.block_size, sizing.prefix_caching);
}

int64_t planned_kv_bytes(std::span<const LayerKvSpec> specs, DType dtype, const KvSizing& sizing) {
  KvGroups groups = kv_groups_of(specs);
  std::vector<int64_t> bytes = group_block_bytes(specs, groups, sizing.block_size, dtype);
  return kv_bytes(plan_group_blocks(groups, bytes, sizing), bytes);
}

std::optional<DType> kv_cache_dtype_from_name(std::string_view name) {
  if (name == "auto") return std::nullopt;
  if (name == "fp8" || name == "fp8_e4m3") return DType::F8E4M3;
  fail("--kv-cache-dtype must be auto, fp8 or fp8_e4m3 (got '{}')", name);
}

int64_t spare_kv_bytes(const Backend& backend, const ModelConfig& c, const KvSizing& s) {
  const int64_t free = backend.available_memory();
  if (backend.device() == Device::CPU) return free / 4;
  const int64_t activations = int64_t(s.max_batched_tokens) *
                              (8 * int64_t(c.hidden_size) + 4 * int64_t(c.intermediate_size)) * 2;
  const int64_t logits = int64_t(std::max(s.max_rows, 1)) * c.vocab_size * 4 * 3;
  const int64_t headroom = (int64_t(1) << 30) + activations + logits;
  return int64_t(double(free) * 0.92) - headroom;
}

}  // namespace tandem
