// What constrains a row's next token: its grammar's matcher and its thinking
// (engine/reasoning_state.h). Both are values: the engine advances a sequence's own, and
// speculative decoding advances copies along a row's proposals to mask each proposed
// position exactly as that position would be masked without speculation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/reasoning_state.h"
#include "grammar/matcher.h"

namespace tandem {

enum class GrammarVerdict : uint8_t {
  Continue,  // more may follow
  Ended,     // the token was EOS, taken because the output was complete
  Complete,  // nothing but EOS may follow: the row is done
  Rejected,  // the token broke the mask (a sampler bug) or the grammar its limits
};

struct RowConstraint {
  std::optional<grammar::Matcher> matcher;   // a constrained request's place in its grammar
  std::optional<ReasoningState> reasoning;   // a thinking row's place in its thinking

  // Takes an emitted token: a thinking row's thinking decides what the grammar sees, until
  // it answers. Rejected sets `why`.
  GrammarVerdict follow(int32_t token, std::string* why);
  // Whether the next token has a mask (a grammar that is not done, or a thinking that
  // decides it).
  bool has_mask() const;
  // Fills `words` (ceil(V / 32)) with the tokens allowed next; requires has_mask(). May
  // throw grammar::GrammarError (the grammar outgrew its limits).
  void fill_mask(std::span<uint32_t> words) const;
};

}  // namespace tandem
