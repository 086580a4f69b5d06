#include "grammar/compiled_grammar.h"

namespace tandem::grammar {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Program> program,
                                 std::shared_ptr<const TokenVocab> vocab, std::string key,
                                 const GrammarLimits& limits)
    : program_(std::move(program)),
      vocab_(std::move(vocab)),
      key_(std::move(key)),
      automaton_(program_, limits.automaton),
      masks_(vocab_, limits.max_mask_bytes),
      start_(automaton_.start()) {}

std::optional<StateId> CompiledGrammar::advance(StateId s, std::string_view bytes) {
  std::lock_guard lock(mu_);
  for (char c : bytes) {
    s = automaton_.next(s, uint8_t(c));
    if (s == kDeadState) return std::nullopt;
  }
  return s;
}

bool CompiledGrammar::can_end(StateId s) {
  std::lock_guard lock(mu_);
  return automaton_.can_end(s);
}

bool CompiledGrammar::can_continue(StateId s) {
  std::lock_guard lock(mu_);
  return automaton_.can_continue(s);
}

void CompiledGrammar::fill_mask(StateId s, std::span<uint32_t> words) {
  std::lock_guard lock(mu_);
  masks_.fill(automaton_, s, words);
  if (automaton_.can_end(s))
    for (int32_t id : vocab_->eos_ids()) words[size_t(id) >> 5] |= 1u << (id & 31);
}

GrammarStats CompiledGrammar::stats() {
  std::lock_guard lock(mu_);
  return GrammarStats{program_->insts.size(), automaton_.num_states(), automaton_.memory_bytes(),
                      masks_.stats()};
}

}  // namespace tandem::grammar
