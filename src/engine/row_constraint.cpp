#include "engine/row_constraint.h"

#include <fmt/format.h>

#include "grammar/grammar_error.h"

namespace tandem {

namespace {

// Where a constrained row stands once its matcher has taken a token's answer part.
GrammarVerdict verdict_after(grammar::Matcher& m) {
  if (m.is_finished()) return GrammarVerdict::Ended;
  return m.must_end() ? GrammarVerdict::Complete : GrammarVerdict::Continue;
}

GrammarVerdict follow_grammar(grammar::Matcher& m, int32_t token, std::string* why) {
  try {
    if (!m.accept_token(token)) {
      *why = fmt::format("token {} is not allowed by the grammar", token);
      return GrammarVerdict::Rejected;
    }
    return verdict_after(m);
  } catch (const grammar::GrammarError& e) {
    *why = e.what();
    return GrammarVerdict::Rejected;
  }
}

// A thinking row's token, before it answers: its thinking decides what the grammar sees.
GrammarVerdict follow_thinking(ReasoningState& reasoning, grammar::Matcher* m, int32_t token,
                               std::string* why) {
  try {
    switch (reasoning.accept(token, m)) {
      case ReasoningState::Role::Thinking:
        return GrammarVerdict::Continue;
      case ReasoningState::Role::Answer:
        return m ? verdict_after(*m) : GrammarVerdict::Continue;
      case ReasoningState::Role::Rejected:
        break;
    }
    *why = fmt::format("token {} begins an answer the grammar does not allow", token);
  } catch (const grammar::GrammarError& e) {
    *why = e.what();
  }
  return GrammarVerdict::Rejected;
}

}  // namespace

GrammarVerdict RowConstraint::follow(int32_t token, std::string* why) {
  if (reasoning && !reasoning->answering())
    return follow_thinking(*reasoning, matcher ? &*matcher : nullptr, token, why);
  if (matcher) return follow_grammar(*matcher, token, why);
  return GrammarVerdict::Continue;
}

bool RowConstraint::has_mask() const {
  if (reasoning && reasoning->decides_mask()) return true;
  return matcher && !matcher->is_finished() && (!reasoning || reasoning->answering());
}

void RowConstraint::fill_mask(std::span<uint32_t> words) const {
  if (reasoning && reasoning->decides_mask())
    reasoning->fill_mask(matcher ? &*matcher : nullptr, words);
  else
    matcher->fill_mask(words);
}

}  // namespace tandem
