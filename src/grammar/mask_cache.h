// Token masks per automaton state. A state's mask is computed once and kept in whichever
// form is smallest: the allowed ids, the rejected ids, or the bitmask itself. Later rows in
// the same state (the same schema at the same place, whatever the row) copy it out in a
// few microseconds. A state is a whole pushdown configuration, stack included, so a cached
// mask is exact: no token needs a second look at run time.
//
// The key is Automaton::canonical(state): states that differ only in how far they are from
// the end of a long repetition (a maxLength string) share a mask, because no trie token is
// long enough to tell them apart; the few longer tokens are checked per state.
//
// Computing a mask walks the vocabulary trie through the automaton (a rejected byte prunes
// the whole subtree of tokens that start with it). Most states share their top frame with
// others (the inside of a string is the same wherever the string sits), so the walk is
// split the way xgrammar splits it:
// - once per top frame (Automaton::top_frame), a walk decides every token that the rules
//   running now accept or reject by themselves, and collects the trie subtrees of tokens
//   that return into the unknown caller (a string's closing quote and what follows it);
// - per state, only those subtrees are walked from the real state.
// A top frame whose undecided subtrees hold too many tokens is not worth it; its states
// walk the whole trie instead.
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
  uint64_t misses = 0;        // masks computed
  uint64_t frame_walks = 0;   // top frames decided
  uint64_t full_walks = 0;    // masks computed without their frame's help
  uint64_t nodes_walked = 0;  // trie nodes visited by all walks
  size_t bytes = 0;           // cached masks and frames
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
  struct FrameEntry {
    Entry decided;                        // accepted whatever the stack below
    std::vector<uint32_t> open_subtrees;  // trie nodes whose tokens depend on that stack
    bool useful;                          // open subtrees hold few enough tokens
  };

  void compute(Automaton& automaton, StateId s);
  // The tokens too long for the trie that real allows (cached per state).
  const std::vector<uint32_t>& long_tokens_allowed(Automaton& automaton, StateId real);
  const FrameEntry& frame_entry(Automaton& automaton, StateId top);
  // Walks trie nodes [begin, end) (a subtree, or the whole trie from 1), whose parent at
  // base_depth is in state s, setting allowed tokens in scratch_. With kFrame, collects the
  // roots of subtrees left open by an escape into open.
  template <bool kFrame>
  void walk(Automaton& automaton, StateId s, uint32_t begin, uint32_t end, uint32_t base_depth,
            std::vector<uint32_t>* open);
  Entry compress(std::span<const uint32_t> words) const;
  void expand(const Entry& e, std::span<uint32_t> words) const;
  void charge(size_t bytes);

  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<uint32_t> all_words_;  // every token a grammar may allow
  size_t num_grammar_tokens_ = 0;
  size_t max_bytes_;
  std::unordered_map<StateId, Entry> entries_;
  std::unordered_map<StateId, FrameEntry> frames_;
  std::unordered_map<StateId, std::vector<uint32_t>> long_allowed_;  // by real state
  std::vector<StateId> state_at_;    // walk scratch: the state at each trie depth
  std::vector<uint8_t> escaped_at_;  // walk scratch: an escape happened on the path
  std::vector<uint32_t> scratch_;    // walk scratch: the mask and the scratch bit's word
  MaskCacheStats stats_;
};

}  // namespace tandem::grammar
