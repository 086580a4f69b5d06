// One row's place in its grammar. Advance it on every token the row emits; before each
// step ask it for the mask of tokens allowed next. Cheap to copy (a state id and a shared
// grammar), so `n` choices of one request can fork it. There is no rollback: a rejected
// token leaves the matcher where it was.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "grammar/compiled_grammar.h"

namespace tandem::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<CompiledGrammar> grammar);

  // Takes token id if the grammar allows it now, and says whether it did. An EOS token is
  // allowed exactly when can_end(), and finishes the matcher; special tokens never are.
  bool accept_token(int32_t id);
  // Takes raw bytes (a forced prefix, or a test's text), all or nothing.
  bool accept_bytes(std::string_view bytes);

  bool can_end() const;                           // the output so far is complete: EOS is allowed
  bool must_end() const;                          // ... and nothing but EOS is
  bool is_finished() const { return finished_; }  // EOS was accepted

  // Fills words (grammar().vocab().num_mask_words()) with the tokens allowed next: bit id
  // of word id / 32. After EOS nothing is allowed.
  void fill_mask(std::span<uint32_t> words) const;

  CompiledGrammar& grammar() const { return *grammar_; }
  StateId state() const { return state_; }

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  StateId state_;
  bool finished_ = false;
};

}  // namespace tandem::grammar
