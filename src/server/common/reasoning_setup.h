// What a served model needs once to think (issue 43), and per request: the reasoning
// format's delimiters as the model's tokens (engine/thinking_vocab.h), whether its text
// must keep special tokens so the parser can see them (Gemma 4's delimiters are control
// tokens), and the engine-side control of one row.
#pragma once

#include <memory>
#include <optional>

#include "engine/engine_api.h"
#include "engine/thinking_vocab.h"
#include "server/common/reasoning_parser.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

// The format's delimiters for this tokenizer, sized to the model's logits.
std::shared_ptr<const ThinkingVocab> make_thinking_vocab(const Tokenizer& tokenizer,
                                                         const ModelInfo& info,
                                                         const ReasoningSyntax& syntax);

// Whether a delimiter is one control token: then a row's text must keep special tokens
// (skip_special_tokens off), or the parser would never see where the thinking ends.
bool delimiters_are_special(const Tokenizer& tokenizer, const ReasoningSyntax& syntax);

// The engine's part of a row that may think, or nullopt when the engine has nothing to
// do: thinking off (the prompt closed the block), or neither a budget nor a grammar (the
// server's parser alone splits the text then).
std::optional<ThinkingControl> thinking_control(std::shared_ptr<const ThinkingVocab> vocab,
                                                ThinkingStart start, std::optional<int> budget,
                                                bool constrained);

}  // namespace tandem::server
