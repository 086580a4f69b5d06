// NgramIndex: the n-gram proposer of speculative decoding ("prompt lookup": vLLM's
// method "ngram"). A row's own tokens — prompt and output — are indexed by their n-grams
// for each n in [min_n, max_n]; the proposal for the next tokens is what followed the
// latest earlier occurrence of the row's longest indexed suffix. Each step costs
// O(max_n − min_n + 1) lookups, not a scan of the context.
//
// The index only grows: it is fed the sequence's final tokens (engine.h), which are only
// ever appended. Each n has an open-addressing table of end positions (4 bytes a slot, at
// most half full), compared by the tokens themselves, so a lookup is exact.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tandem {

class NgramIndex {
 public:
  NgramIndex(int min_n, int max_n);

  // Indexes every n-gram of `tokens` that has a successor (all but the suffix). `tokens`
  // extends the tokens of the previous call.
  void update(std::span<const int32_t> tokens);
  // Up to `k` proposed tokens after `tokens` (empty when no suffix of length in
  // [min_n, max_n] occurred before): the tokens that followed the latest earlier
  // occurrence of the longest such suffix. When that occurrence overlaps the suffix (a
  // repeating pattern of period p), the proposal continues the pattern with period p.
  // Calls update(tokens) first.
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int k);

  // N-grams ending before this position of the tokens are indexed.
  int indexed() const { return indexed_; }
  int min_n() const { return min_n_; }
  int max_n() const { return max_n_; }

 private:
  // One n's table: slot → end position + 1 of an n-gram's latest occurrence (0: empty).
  struct Table {
    int n = 0;
    std::vector<int32_t> slots;
    int64_t used = 0;
  };
  void insert(Table& t, std::span<const int32_t> tokens, int32_t end);
  // The latest end position of the n-gram tokens[at - n + 1 .. at], before `at`.
  std::optional<int32_t> find(const Table& t, std::span<const int32_t> tokens, int32_t at) const;
  void grow(Table& t, std::span<const int32_t> tokens);

  int min_n_, max_n_;
  std::vector<Table> tables_;  // [max_n - min_n + 1], n ascending
  int32_t indexed_ = 0;        // n-grams ending before this position are indexed
};

}  // namespace tandem
