#include "grammar/matcher.h"

#include <algorithm>

#include "core/error.h"

namespace tandem::grammar {

Matcher::Matcher(std::shared_ptr<CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), state_(grammar_->start_state()) {}

bool Matcher::accept_token(int32_t id) {
  const TokenVocab& vocab = grammar_->vocab();
  if (finished_ || id < 0 || id >= vocab.num_tokens()) return false;
  if (vocab.is_eos(id)) {
    if (!grammar_->can_end(state_)) return false;
    finished_ = true;
    return true;
  }
  if (!vocab.is_grammar_token(id)) return false;
  return accept_bytes(vocab.bytes(id));
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (finished_) return false;
  std::optional<StateId> next = grammar_->advance(state_, bytes);
  if (!next) return false;
  state_ = *next;
  return true;
}

bool Matcher::can_end() const {
  return finished_ || grammar_->can_end(state_);
}

bool Matcher::must_end() const {
  return finished_ || (grammar_->can_end(state_) && !grammar_->can_continue(state_));
}

void Matcher::fill_mask(std::span<uint32_t> words) const {
  if (finished_) {
    TANDEM_CHECK(words.size() == grammar_->vocab().num_mask_words());
    std::fill(words.begin(), words.end(), 0u);
    return;
  }
  grammar_->fill_mask(state_, words);
}

}  // namespace tandem::grammar
