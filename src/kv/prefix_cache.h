// Prefix-cache keys (docs/DESIGN.md §3). Every full block of final tokens is named by a 64-bit
// hash chained on its parent's: hash(parent hash, the block's token ids), where the first
// block's parent is the root, a hash of the request's extra keys (its `cache_salt`, and
// the LoRA adapter once adapters exist). Two requests share a block only when their whole
// chains up to it agree. A hash alone is never trusted: a cached block keeps its parent
// hash and its tokens (BlockKey), and a lookup compares both (BlockPool::lookup), so a
// collision costs a miss, never a wrong answer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

using BlockHash = uint64_t;

// What besides the tokens decides whether KV can be shared: two requests with different
// extra keys never share a block.
struct PrefixKeys {
  std::string cache_salt;  // the request's `cache_salt` ("" when none)
  std::string adapter;     // the LoRA adapter id ("" for the base model)
};

BlockHash prefix_root(const PrefixKeys& keys);
BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);
// The same block holding (some of) the images `contents` (their content hashes, in order):
// the same placeholder tokens with other pixels hash differently.
BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens,
                     std::span<const uint64_t> contents);

// Positions [begin, end) of a sequence's tokens that are one unit: an image's soft tokens.
// Its content hash mixes into every block the range overlaps.
struct TokenRange {
  int begin = 0, end = 0;
  uint64_t content = 0;
};

// What names one cached block, and what a hit must match.
struct BlockKey {
  BlockHash hash = 0;
  BlockHash parent = 0;
  std::span<const int32_t> tokens;  // the block's block_size token ids
};

// A sequence's chain: the hashes of its full blocks, extended as tokens become final.
class BlockHashChain {
 public:
  // `media`: the sequence's images (sorted, disjoint), mixed into the blocks they overlap.
  explicit BlockHashChain(BlockHash root = 0, std::vector<TokenRange> media = {})
      : root_(root), media_(std::move(media)) {}

  // Hashes every full block of `tokens` not hashed yet. `tokens` must start with what
  // earlier calls saw (final tokens only ever grow).
  void extend(std::span<const int32_t> tokens, int block_size);
  int size() const { return int(hashes_.size()); }
  std::span<const BlockHash> hashes() const { return hashes_; }
  BlockHash parent(int block) const { return block == 0 ? root_ : hashes_[size_t(block) - 1]; }
  // The key of logical block `block` (< size()) of `tokens`.
  BlockKey key(int block, std::span<const int32_t> tokens, int block_size) const;

 private:
  BlockHash root_;
  std::vector<TokenRange> media_;
  std::vector<BlockHash> hashes_;
};

}  // namespace tandem
