// KV groups (docs/DESIGN.md §3): which layers index the same block-id space. Layers are
// grouped by attention kind, not by geometry: group 0 holds the full-attention layers,
// then one group per distinct sliding window, smallest window first. Each layer keeps
// its own storage shaped by its own heads × head_dim, indexed by its group's block ids,
// so one block table per group serves layers of any shape. A layer that reads another
// layer's KV (Gemma 3n/4 sharing) owns no storage and belongs to its source's group.
// A model with no sliding layers has exactly one group: the layout before groups.
#pragma once

#include <optional>
#include <span>
#include <vector>

namespace tandem {

// What grouping needs to know of one layer (the model's LayerKvSpec, without geometry).
struct KvLayerKind {
  int window = 0;        // 0 = full attention; >0: a query at p sees keys (p - window, p]
  std::optional<int> shares_with;  // layer whose KV this layer reads (none: its own)
};

struct KvGroup {
  int window = 0;           // 0 = full attention: a sequence keeps every block
  std::vector<int> layers;  // layers owning storage indexed by this group's ids, ascending

  bool sliding() const { return window > 0; }
};

struct KvGroups {
  std::vector<KvGroup> groups;   // [G] full-attention group first (if any), then windows ascending
  std::vector<int> layer_group;  // [L] group of each layer; a sharing layer: its source's

  int num_groups() const { return int(groups.size()); }
  int num_layers() const { return int(layer_group.size()); }
};

// Groups the layers. Throws tandem::Error when a sharing layer points at a layer that
// shares itself or is out of range, or sees further back than its source keeps (a
// full-attention layer reading a sliding layer's KV would read released blocks).
KvGroups make_kv_groups(std::span<const KvLayerKind> layers);

}  // namespace tandem
