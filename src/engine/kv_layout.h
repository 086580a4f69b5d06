// KV layout of a model: its layers' KV groups (kv/kv_groups.h), what one block id costs
// in each group's storage, and how many blocks each group gets under a budget
// (kv/kv_budget.h). The bridge between a model's kv_specs() and the kv/ module, which
// knows no model.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "kv/kv_block_manager.h"
#include "kv/kv_budget.h"
#include "kv/kv_groups.h"
#include "model/model.h"

namespace tandem {

KvGroups kv_groups_of(std::span<const LayerKvSpec> specs);

// [G] bytes one block id of each group takes: K and V of every layer that owns storage
// in it, each with its own kv heads × head dim.
std::vector<int64_t> group_block_bytes(std::span<const LayerKvSpec> specs, const KvGroups& groups,
                                       int block_size, DType dtype);

// Bytes one block id takes across all layers (every group's block, added).
int64_t kv_bytes_per_block(std::span<const LayerKvSpec> specs, int block_size, DType dtype);

// [G] blocks of each group (null blocks included) for these layers under `sizing`.
std::vector<int> plan_kv_blocks(std::span<const LayerKvSpec> specs, DType dtype,
                                const KvSizing& sizing);

// The block manager for a model's KV under `sizing`.
KvBlockManager make_kv_block_manager(std::span<const LayerKvSpec> specs, DType dtype,
                                     const KvSizing& sizing);

// Bytes of KV storage the planned blocks take, all groups together.
int64_t planned_kv_bytes(std::span<const LayerKvSpec> specs, DType dtype, const KvSizing& sizing);

// Bytes `backend` can give the KV cache now (after the weights): a quarter of free RAM on
// the CPU, which the rest of the machine shares; on a GPU most of its free memory, less
// headroom for a step's activations and its f32 logits: the decode graphs' one buffer
// (DecodeGraphs), an eager step's and the sampler's working copy.
int64_t spare_kv_bytes(const Backend& backend, const ModelConfig& c, const KvSizing& s);

// The KV cache dtype a `--kv-cache-dtype` value names, in vLLM's spellings: "auto" →
// nullopt (the backend's act dtype), "fp8" and "fp8_e4m3" → F8E4M3 (stored unscaled).
// Throws tandem::Error naming the accepted values otherwise.
std::optional<DType> kv_cache_dtype_from_name(std::string_view name);

}  // namespace tandem
