#include "engine/reasoning_state.h"

#include <algorithm>

#include "core/error.h"
#include "grammar/grammar_error.h"

namespace tandem {

namespace {

void set_bit(std::span<uint32_t> words, int32_t id) {
  words[size_t(id) >> 5] |= 1u << (id & 31);
}

void clear_bit(std::span<uint32_t> words, int32_t id) {
  words[size_t(id) >> 5] &= ~(1u << (id & 31));
}

}  // namespace

ReasoningState::ReasoningState(const ThinkingControl& control,
                               std::shared_ptr<grammar::CompiledGrammar> grammar)
    : vocab_(control.vocab), budget_(control.budget), phase_(Phase::Opening) {
  TANDEM_CHECK(vocab_, "a thinking row needs the model's thinking vocabulary");
  if (grammar) fresh_.emplace(std::move(grammar));
  if (control.starts_open) enter_thinking(nullptr);
}

bool ReasoningState::reads_last_token() const {
  switch (phase_) {
    case Phase::Opening:
      return fresh_.has_value();
    case Phase::Thinking:
      return fresh_.has_value() || budget_.has_value();
    case Phase::Answering:
      return false;
  }
  return false;
}

bool ReasoningState::decides_mask() const {
  switch (phase_) {
    case Phase::Opening:
      return fresh_.has_value();
    case Phase::Thinking:
      return fresh_.has_value() || forced_next_.has_value();
    case Phase::Answering:
      return false;
  }
  return false;
}

void ReasoningState::enter_thinking(grammar::Matcher* answer) {
  phase_ = Phase::Thinking;
  if (answer) *answer = *fresh_;  // it may have followed the opening tokens
  if (budget_ && *budget_ <= 0) forced_next_ = 0;
}

ReasoningState::Role ReasoningState::accept(int32_t token, grammar::Matcher* answer) {
  switch (phase_) {
    case Phase::Opening:
      return accept_opening(token, answer);
    case Phase::Thinking:
      return accept_thinking(token, answer);
    case Phase::Answering:
      break;
  }
  TANDEM_CHECK(false, "an answering row's tokens go to its grammar directly");
  return Role::Rejected;
}

// Whitespace, then the start delimiter: the block opens. Any other token: the answer,
// which the grammar has followed all along.
ReasoningState::Role ReasoningState::accept_opening(int32_t token, grammar::Matcher* answer) {
  if (answer && grammar_alive_) grammar_alive_ = answer->accept_token(token);
  const std::string& b = vocab_->bytes(token);
  const std::string_view rest = std::string_view(vocab_->start()).substr(opened_);
  const bool all_space = !b.empty() && std::all_of(b.begin(), b.end(), [](char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
  });
  if (!b.empty() && rest.starts_with(b)) {
    opened_ += uint32_t(b.size());
    if (opened_ == vocab_->start().size()) enter_thinking(answer);
    return Role::Thinking;
  }
  if (opened_ == 0 && all_space && space_ + b.size() <= vocab_->max_space_before_start()) {
    space_ += uint32_t(b.size());
    return Role::Thinking;  // not yet decided; the grammar has followed it too
  }
  phase_ = Phase::Answering;
  if (answer && !grammar_alive_) return Role::Rejected;
  return Role::Answer;
}

ReasoningState::Role ReasoningState::accept_thinking(int32_t token, grammar::Matcher* answer) {
  const std::string& b = vocab_->bytes(token);
  const uint32_t end_size = uint32_t(vocab_->end().size());
  for (size_t i = 0; i < b.size(); ++i) {
    end_state_ = vocab_->end_step(end_state_, uint8_t(b[i]));
    if (end_state_ != end_size) continue;
    phase_ = Phase::Answering;
    forced_next_.reset();
    if (!answer) return Role::Answer;
    *answer = *fresh_;
    return answer->accept_bytes(std::string_view(b).substr(i + 1)) ? Role::Answer : Role::Rejected;
  }
  if (forced_next_) {
    // Past the last forced token the block has closed (their bytes end with the end
    // delimiter); an early completion above ends forcing too.
    if (++*forced_next_ >= vocab_->forced_end().size()) forced_next_.reset();
    return Role::Thinking;
  }
  ++num_thinking_;
  if (budget_ && num_thinking_ >= *budget_) forced_next_ = 0;
  return Role::Thinking;
}

void ReasoningState::fill_mask(const grammar::Matcher* answer, std::span<uint32_t> words) const {
  TANDEM_CHECK(decides_mask(), "no mask to fill");
  if (phase_ == Phase::Opening) return fill_opening(answer, words);
  fill_thinking(words);
}

// The grammar's tokens while it has followed the output, the start delimiter's next ones,
// and whitespace before it, within bounds.
void ReasoningState::fill_opening(const grammar::Matcher* answer, std::span<uint32_t> words) const {
  if (answer && grammar_alive_) {
    answer->fill_mask(words);
  } else {
    std::fill(words.begin(), words.end(), 0u);
  }
  bool any = false;
  for (const ThinkingVocab::Continue& c : vocab_->opening(opened_)) {
    set_bit(words, c.token);
    any = true;
  }
  if (opened_ == 0)
    for (const auto& [token, length] : vocab_->spaces())
      if (space_ + length <= vocab_->max_space_before_start()) set_bit(words, token);
  // The vocabulary can spell the rest of the start (a byte at a time at worst) unless the
  // start's tokens are missing from it: never an empty mask.
  if (!any && !(answer && grammar_alive_))
    throw grammar::GrammarError("", "", "the row can neither answer nor open its thinking");
}

// A forced token; or everything but EOS and the tokens that would close the block and go
// on with bytes the grammar rejects.
void ReasoningState::fill_thinking(std::span<uint32_t> words) const {
  if (forced_next_) {
    std::fill(words.begin(), words.end(), 0u);
    set_bit(words, vocab_->forced_end()[*forced_next_]);
    return;
  }
  std::fill(words.begin(), words.end(), ~0u);
  const int32_t n = vocab_->num_tokens();
  if (n % 32) words[words.size() - 1] &= (1u << (n % 32)) - 1;  // no ids past the vocabulary
  for (int32_t eos : vocab_->eos_ids()) clear_bit(words, eos);
  for (const ThinkingVocab::Completion& c : vocab_->closing(end_state_)) {
    const std::string_view tail = std::string_view(vocab_->bytes(c.token)).substr(c.tail);
    if (tail.empty()) continue;
    grammar::Matcher probe = *fresh_;
    if (!probe.accept_bytes(tail)) clear_bit(words, c.token);
  }
}

}  // namespace tandem
