#include "kv/prefix_cache.h"

#include <algorithm>
#include <cstring>

namespace tandem {

namespace {

// A multiply-fold mixer (the 64×64→128-bit product folded onto itself, as in wyhash):
// every input bit reaches every output bit in one step.
constexpr uint64_t kSecret0 = 0xa0761d6478bd642full, kSecret1 = 0xe7037ed1a0b428dbull,
                   kSecret2 = 0x8ebc6af09c88c6e3ull, kSecret3 = 0x589965cc75374cc3ull;

uint64_t mix(uint64_t a, uint64_t b) {
  const __uint128_t r = __uint128_t(a) * b;
  return uint64_t(r) ^ uint64_t(r >> 64);
}

// Absorbs 8-byte words into `h`; `len` (in bytes) is mixed in first, so inputs that differ
// only by trailing zeros differ.
uint64_t absorb(uint64_t h, const unsigned char* bytes, size_t len) {
  h = mix(h ^ kSecret0, uint64_t(len) ^ kSecret1);
  for (size_t i = 0; i < len; i += 16) {
    uint64_t w[2] = {0, 0};
    std::memcpy(w, bytes + i, std::min<size_t>(16, len - i));
    h = mix(w[0] ^ kSecret2, w[1] ^ h ^ kSecret3);
  }
  return mix(h ^ kSecret1, kSecret2);
}

uint64_t absorb(uint64_t h, std::string_view s) {
  return absorb(h, reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

}  // namespace

BlockHash prefix_root(const PrefixKeys& keys) {
  // Length-prefixed fields: ("ab", "") and ("a", "b") differ.
  return absorb(absorb(kSecret3, keys.cache_salt), keys.adapter);
}

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens) {
  return absorb(parent, reinterpret_cast<const unsigned char*>(tokens.data()), tokens.size_bytes());
}

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens,
                     std::span<const uint64_t> contents) {
  const BlockHash h = hash_block(parent, tokens);
  if (contents.empty()) return h;
  return absorb(h, reinterpret_cast<const unsigned char*>(contents.data()), contents.size_bytes());
}

void BlockHashChain::extend(std::span<const int32_t> tokens, int block_size) {
  const size_t full = tokens.size() / size_t(block_size);
  std::vector<uint64_t> contents;
  while (hashes_.size() < full) {
    const size_t b = hashes_.size();
    const int begin = int(b) * block_size, end = begin + block_size;
    contents.clear();
    for (const TokenRange& m : media_)
      if (m.begin < end && begin < m.end) contents.push_back(m.content);
    hashes_.push_back(
        hash_block(parent(int(b)), tokens.subspan(size_t(begin), size_t(block_size)), contents));
  }
}

BlockKey BlockHashChain::key(int block, std::span<const int32_t> tokens, int block_size) const {
  return {hashes_[size_t(block)], parent(block),
          tokens.subspan(size_t(block) * size_t(block_size), size_t(block_size))};
}

}  // namespace tandem
