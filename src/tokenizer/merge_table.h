// The BPE merge table: (left id, right id) -> (rank, merged id), as a flat open-addressing
// hash map. Merging looks pairs up for every adjacent symbol, so this is the hot lookup of
// encoding; std::unordered_map's node chasing costs several times more.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::tok {

class MergeTable {
 public:
  struct Merge {
    uint32_t rank;   // lower merges first
    int32_t new_id;  // the token the pair becomes
  };

  explicit MergeTable(size_t expected = 0) { rehash(expected); }

  // A later merge of the same pair replaces the earlier one (HF collects merges into a map).
  void insert_or_assign(int32_t left, int32_t right, Merge m) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size());
    Slot& s = probe(key(left, right));
    if (s.key == kEmpty) ++size_;
    s = {key(left, right), m};
  }

  const Merge* find(int32_t left, int32_t right) const {
    uint64_t k = key(left, right);
    for (uint64_t i = hash(k) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == k) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Merge value;
  };
  // Ids are non-negative int32, so no real pair packs to all ones.
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  static uint64_t key(int32_t l, int32_t r) {
    return (uint64_t{static_cast<uint32_t>(l)} << 32) | static_cast<uint32_t>(r);
  }
  static uint64_t hash(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 31);
  }

  Slot& probe(uint64_t k) {
    for (uint64_t i = hash(k) & mask_;; i = (i + 1) & mask_)
      if (slots_[i].key == k || slots_[i].key == kEmpty) return slots_[i];
  }

  // Grows to hold at least `entries` at load factor <= 1/2.
  void rehash(size_t entries) {
    size_t capacity = 16;
    while (capacity < entries * 2) capacity *= 2;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{kEmpty, {}});
    mask_ = capacity - 1;
    for (const Slot& s : old)
      if (s.key != kEmpty) probe(s.key) = s;
  }

  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace tandem::tok
