// A word -> ids cache for BPE, safe to share between threads. Direct-mapped: a word hashes
// to one 128-byte slot holding the word and its ids inline, so a lookup is one hash, two
// adjacent cache lines and no allocation. Slots are guarded by 64 striped mutexes, so concurrent
// encodes rarely wait on each other. A colliding word simply replaces the slot's word
// (words repeat with a Zipf distribution, so the frequent ones stay in).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

namespace tandem::tok {

// Hash for unordered containers keyed by std::string but searched with std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class BpeCache {
 public:
  static constexpr size_t kMaxWordBytes = 62;  // longer words are not cached
  static constexpr size_t kMaxIds = 14;        // words of more tokens are not cached

  explicit BpeCache(size_t num_slots_log2 = 15)
      : mask_((size_t{1} << num_slots_log2) - 1), slots_(new Slot[mask_ + 1]()) {}

  // On a hit, appends the cached ids to out and returns true.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const {
    if (word.size() > kMaxWordBytes) return false;
    uint64_t h = StringHash{}(word);
    const Slot& slot = slots_[h & mask_];
    std::lock_guard<std::mutex> lock(stripe(h));
    if (slot.hash != h || slot.len != word.size() ||
        std::memcmp(slot.word, word.data(), word.size()) != 0)
      return false;
    out.insert(out.end(), slot.ids, slot.ids + slot.num_ids);
    return true;
  }

  void insert(std::string_view word, std::span<const int32_t> ids) const {
    if (word.size() > kMaxWordBytes || ids.size() > kMaxIds || ids.empty()) return;
    uint64_t h = StringHash{}(word);
    Slot& slot = slots_[h & mask_];
    std::lock_guard<std::mutex> lock(stripe(h));
    slot.hash = h;
    slot.len = static_cast<uint8_t>(word.size());
    std::memcpy(slot.word, word.data(), word.size());
    slot.num_ids = static_cast<uint8_t>(ids.size());
    std::memcpy(slot.ids, ids.data(), ids.size() * sizeof(int32_t));
  }

 private:
  struct alignas(128) Slot {
    uint64_t hash;
    uint8_t len;  // 0: empty (empty words are never cached)
    uint8_t num_ids;
    char word[kMaxWordBytes];
    int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Slot) == 128);
  static constexpr size_t kStripes = 64;

  // A function of the slot, so one slot is always guarded by the same mutex.
  std::mutex& stripe(uint64_t h) const { return stripes_[(h & mask_) % kStripes]; }

  size_t mask_;
  std::unique_ptr<Slot[]> slots_;
  mutable std::array<std::mutex, kStripes> stripes_;
};

}  // namespace tandem::tok
