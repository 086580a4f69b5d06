#include "engine/ngram_index.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

namespace {

// FNV-1a over the n-gram's ids, mixed at the end (tables are indexed by the low bits).
uint64_t hash_of(std::span<const int32_t> gram) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : gram) {
    h ^= uint32_t(t);
    h *= 1099511628211ull;
  }
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

bool same(std::span<const int32_t> tokens, int32_t end_a, int32_t end_b, int n) {
  return std::equal(tokens.begin() + (end_a - n + 1), tokens.begin() + end_a + 1,
                    tokens.begin() + (end_b - n + 1));
}

}  // namespace

NgramIndex::NgramIndex(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  TANDEM_CHECK(1 <= min_n && min_n <= max_n, "n-gram sizes {}..{}", min_n, max_n);
  for (int n = min_n; n <= max_n; n++) tables_.push_back({n, std::vector<int32_t>(64, 0), 0});
}

void NgramIndex::grow(Table& t, std::span<const int32_t> tokens) {
  std::vector<int32_t> old;
  old.swap(t.slots);
  t.slots.assign(old.size() * 2, 0);
  t.used = 0;
  for (int32_t v : old)
    if (v > 0) insert(t, tokens, v - 1);
}

void NgramIndex::insert(Table& t, std::span<const int32_t> tokens, int32_t end) {
  if (2 * (t.used + 1) > int64_t(t.slots.size())) grow(t, tokens);
  const size_t mask = t.slots.size() - 1;
  for (size_t i = hash_of(tokens.subspan(size_t(end - t.n + 1), size_t(t.n))) & mask;; i = (i + 1) & mask) {
    int32_t& slot = t.slots[i];
    if (slot == 0) {
      slot = end + 1;
      t.used++;
      return;
    }
    if (same(tokens, slot - 1, end, t.n)) {  // the same n-gram: keep the latest occurrence
      slot = std::max(slot, end + 1);
      return;
    }
  }
}

std::optional<int32_t> NgramIndex::find(const Table& t, std::span<const int32_t> tokens,
                                        int32_t at) const {
  const size_t mask = t.slots.size() - 1;
  for (size_t i = hash_of(tokens.subspan(size_t(at - t.n + 1), size_t(t.n))) & mask;; i = (i + 1) & mask) {
    const int32_t slot = t.slots[i];
    if (slot == 0) return std::nullopt;
    if (same(tokens, slot - 1, at, t.n)) return slot - 1;
  }
}

void NgramIndex::update(std::span<const int32_t> tokens) {
  TANDEM_CHECK(int64_t(tokens.size()) >= indexed_, "the n-gram index saw {} tokens, now {}",
               indexed_, tokens.size());
  // An n-gram ending at e is indexed once its successor tokens[e + 1] is known.
  for (int32_t e = indexed_; e + 1 < int32_t(tokens.size()); e++)
    for (Table& t : tables_)
      if (e + 1 >= t.n) insert(t, tokens, e);
  indexed_ = std::max<int32_t>(indexed_, int32_t(tokens.size()) - 1);
}

std::vector<int32_t> NgramIndex::propose(std::span<const int32_t> tokens, int k) {
  update(tokens);
  std::vector<int32_t> out;
  const int32_t last = int32_t(tokens.size()) - 1;
  if (k <= 0) return out;
  for (auto t = tables_.rbegin(); t != tables_.rend(); ++t) {  // the longest suffix first
    if (last + 1 < t->n) continue;
    const std::optional<int32_t> end = find(*t, tokens, last);
    if (!end) continue;
    const int32_t period = last - *end;  // >= 1: only n-grams with a successor are indexed
    // Past the suffix, the occurrence's continuation is the proposal itself.
    for (int i = 0; i < k; i++)
      out.push_back(i < period ? tokens[size_t(*end + 1 + i)] : out[size_t(i - period)]);
    return out;
  }
  return out;
}

}  // namespace tandem
