// The persistent sm90 prefill's static schedule (cuda_attention_persist_sm90.cu; its top
// comment says why this order), on the device and, for the tests, on the host: which
// (query tile, kv head) item a CTA takes in each round, and how many kv heads share L2 in
// one section of the order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::attn {

// The item (index into the schedule's order) CTA `cta` of `grid` takes in round n: rounds
// alternate direction, so that two rounds even out the work of longest-first items.
__host__ __device__ inline int persist_item(int n, int cta, int grid) {
  return n * grid + (n % 2 == 0 ? cta : grid - 1 - cta);
}

// Item w's query tile (of `tiles`, numbered row by row) and kv head: sections of `section`
// kv heads (the last one holds the remainder) one after the other, and inside each the
// longest tiles first, a tile's heads side by side. w < tiles · num_kv_heads.
__host__ __device__ inline void persist_item_tile(int w, int tiles, int num_kv_heads, int section,
                                                  int& tile, int& kvh) {
  const int full = num_kv_heads / section;  // whole sections
  const int s = w / (section * tiles);
  const int heads = s < full ? section : num_kv_heads - full * section;
  const int i = w - s * section * tiles;
  tile = tiles - 1 - i / heads;
  kvh = s * section + i % heads;
}

// Bytes of K and V a section's heads may hold together (both cards' L2 is 50 MB;
// FlashAttention-3 budgets 32 MB too).
constexpr int64_t kPersistL2Budget = int64_t(32) << 20;

// Kv heads in a section: the most, a power of two (as FlashAttention-3 has it) and at most
// num_kv_heads, whose `keys` bf16 keys and values of `head_dim` fit kPersistL2Budget
// together; one at least.
inline int persist_l2_section(int num_kv_heads, int64_t keys, int head_dim) {
  const int64_t head_bytes = keys * head_dim * 2 * 2;
  int section = 1;
  while (section * 2 <= num_kv_heads && section * 2 * head_bytes <= kPersistL2Budget) section *= 2;
  return section;
}

}  // namespace tandem::attn
