// Token masks per automaton state. A state's mask is computed once, by walking the
// vocabulary trie through the automaton (a rejected byte prunes the whole subtree of
// tokens that start with it), and kept in whichever form is smallest: the allowed ids,
// the rejected ids, or the bitmask itself. Later rows in the same state (the same schema
// at the same place, whatever the row) copy it out in a few microseconds.
//
// A state is a whole pushdown configuration, stack included, so a cached mask is exact:
// no token needs a second look against the stack at run time.
//
// Not thread-safe: CompiledGrammar serializes access.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/token_vocab.h"

namespace tandem::grammar {

struct MaskCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;        // trie walks
  uint64_t nodes_walked = 0;  // trie nodes visited by those walks
  size_t bytes = 0;           // cached masks
};

class MaskCache {
 public:
  MaskCache(std::shared_ptr<const TokenVocab> vocab, size_t max_bytes);

  // Sets words (vocab.num_mask_words() of them) to the non-EOS tokens allowed in s.
  void fill(Automaton& automaton, StateId s, std::span<uint32_t> words);
  const MaskCacheStats& stats() const { return stats_; }

 private:
  enum class Form : uint8_t { Allowed, Rejected, Bits };
  struct Entry {
    Form form;
    std::vector<uint32_t> data;  // token ids, or mask words
  };

  void walk(Automaton& automaton, StateId s, std::span<uint32_t> words);
  Entry compress(std::span<const uint32_t> words, size_t num_allowed) const;
  void expand(const Entry& e, std::span<uint32_t> words) const;

  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<uint32_t> all_words_;  // every token a grammar may allow
  size_t num_grammar_tokens_ = 0;
  size_t max_bytes_;
  std::unordered_map<StateId, Entry> entries_;
  std::vector<StateId> state_at_;  // walk scratch: the state at each trie depth
  MaskCacheStats stats_;
};

}  // namespace tandem::grammar
