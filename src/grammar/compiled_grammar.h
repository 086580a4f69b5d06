// One spec compiled for one vocabulary: the program, its lazily built automaton and the
// token masks of the states reached so far. Shared (through shared_ptr) by every row that
// uses the spec, so the second row in a state pays only a copy of its cached mask. Each
// call takes the grammar's lock: rows of one grammar are served one at a time, rows of
// different grammars in parallel.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "grammar/automaton.h"
#include "grammar/mask_cache.h"
#include "grammar/program.h"
#include "grammar/token_vocab.h"

namespace tandem::grammar {

struct GrammarLimits {
  AutomatonLimits automaton;
  size_t max_mask_bytes = size_t(256) << 20;  // cached masks of one grammar
};

struct GrammarStats {
  size_t num_insts = 0;   // program size
  size_t num_states = 0;  // automaton states built so far
  size_t automaton_bytes = 0;
  MaskCacheStats masks;
};

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Program> program, std::shared_ptr<const TokenVocab> vocab,
                  std::string key, const GrammarLimits& limits = {});

  const TokenVocab& vocab() const { return *vocab_; }
  const std::string& key() const { return key_; }  // the spec's canonical key
  StateId start_state() const { return start_; }

  // The state after bytes, or nullopt when some byte is not allowed. The automaton may
  // grow; past its limits this throws GrammarError (and so do the calls below).
  std::optional<StateId> advance(StateId s, std::string_view bytes);
  bool can_end(StateId s);
  bool can_continue(StateId s);  // some byte may follow
  // words (vocab().num_mask_words()): bit id set when token id may come next; EOS ids
  // exactly when the grammar can end here; special tokens never.
  void fill_mask(StateId s, std::span<uint32_t> words);

  GrammarStats stats();

 private:
  std::shared_ptr<const Program> program_;
  std::shared_ptr<const TokenVocab> vocab_;
  std::string key_;
  std::mutex mu_;
  Automaton automaton_;  // guarded by mu_
  MaskCache masks_;      // guarded by mu_
  StateId start_;
};

}  // namespace tandem::grammar
