#include "grammar/mask_cache.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace tandem::grammar {

namespace {
inline void set_bit(std::span<uint32_t> words, uint32_t id) {
  words[id >> 5] |= 1u << (id & 31);
}
inline bool test_bit(std::span<const uint32_t> words, uint32_t id) {
  return (words[id >> 5] >> (id & 31)) & 1u;
}
}  // namespace

MaskCache::MaskCache(std::shared_ptr<const TokenVocab> vocab, size_t max_bytes)
    : vocab_(std::move(vocab)), max_bytes_(max_bytes) {
  all_words_.assign(vocab_->num_mask_words(), 0);
  for (int32_t id : vocab_->sorted_tokens()) set_bit(all_words_, uint32_t(id));
  num_grammar_tokens_ = vocab_->sorted_tokens().size();
  state_at_.resize(vocab_->max_token_bytes() + 1);
}

void MaskCache::fill(Automaton& automaton, StateId s, std::span<uint32_t> words) {
  TANDEM_CHECK(words.size() == vocab_->num_mask_words(), "mask of {} words for {}", words.size(),
               vocab_->num_mask_words());
  if (auto it = entries_.find(s); it != entries_.end()) {
    ++stats_.hits;
    expand(it->second, words);
    return;
  }
  ++stats_.misses;
  walk(automaton, s, words);
  size_t num_allowed = 0;
  for (uint32_t w : words) num_allowed += size_t(std::popcount(w));
  Entry e = compress(words, num_allowed);
  size_t size = e.data.size() * sizeof(uint32_t) + 64;
  if (stats_.bytes + size > max_bytes_) {
    entries_.clear();  // a full cache starts over; masks are recomputed on demand
    stats_.bytes = 0;
  }
  stats_.bytes += size;
  entries_.emplace(s, std::move(e));
}

void MaskCache::walk(Automaton& automaton, StateId s, std::span<uint32_t> words) {
  std::fill(words.begin(), words.end(), 0u);
  const std::vector<TrieNode>& nodes = vocab_->trie();
  const std::vector<int32_t>& tokens = vocab_->sorted_tokens();
  automaton.ensure_expanded(s);
  state_at_[0] = s;
  uint64_t visited = 0;
  for (size_t i = 1; i < nodes.size();) {
    const TrieNode& node = nodes[i];
    ++visited;
    StateId t = automaton.next_expanded(state_at_[node.depth - 1], node.byte);
    if (t == kDeadState) {
      i = node.skip;
      continue;
    }
    for (uint32_t k = 0; k < node.num_tokens; ++k)
      set_bit(words, uint32_t(tokens[node.first_token + k]));
    if (node.skip != i + 1) {  // a node with children: they read from t
      automaton.ensure_expanded(t);
      state_at_[node.depth] = t;
    }
    ++i;
  }
  stats_.nodes_walked += visited;
}

MaskCache::Entry MaskCache::compress(std::span<const uint32_t> words, size_t num_allowed) const {
  size_t num_rejected = num_grammar_tokens_ - num_allowed;
  Entry e;
  if (num_allowed <= words.size() && num_allowed <= num_rejected) {
    e.form = Form::Allowed;
    for (size_t w = 0; w < words.size(); ++w)
      for (uint32_t bits = words[w]; bits; bits &= bits - 1)
        e.data.push_back(uint32_t(w * 32 + size_t(std::countr_zero(bits))));
  } else if (num_rejected <= words.size()) {
    e.form = Form::Rejected;
    for (int32_t id : vocab_->sorted_tokens())
      if (!test_bit(words, uint32_t(id))) e.data.push_back(uint32_t(id));
  } else {
    e.form = Form::Bits;
    e.data.assign(words.begin(), words.end());
  }
  return e;
}

void MaskCache::expand(const Entry& e, std::span<uint32_t> words) const {
  switch (e.form) {
    case Form::Allowed:
      std::fill(words.begin(), words.end(), 0u);
      for (uint32_t id : e.data) set_bit(words, id);
      return;
    case Form::Rejected:
      std::copy(all_words_.begin(), all_words_.end(), words.begin());
      for (uint32_t id : e.data) words[id >> 5] &= ~(1u << (id & 31));
      return;
    case Form::Bits:
      std::copy(e.data.begin(), e.data.end(), words.begin());
      return;
  }
}

}  // namespace tandem::grammar
