// What a served model needs once to think (issue 43), and per request: the reasoning
// format's delimiters as the model's tokens (engine/thinking_vocab.h), whether its text
// must keep special tokens so the parser can see them (Gemma 4's delimiters are control
// tokens), and the engine-side control of one row.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine_api.h"
#include "engine/thinking_vocab.h"
#include "server/common/answer_split.h"
#include "server/common/reasoning_parser.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

// The names --reasoning-parser takes, for its help and its errors.
inline constexpr const char* kReasoningParserNames =
    "qwen3, deepseek_r1, glm45, gemma4, auto, none";

// A served model's thinking (--reasoning-parser), set up once at startup.
struct ServedReasoning {
  const ReasoningSyntax* syntax = nullptr;     // never null
  std::shared_ptr<const ThinkingVocab> vocab;  // the delimiters as this model's tokens
  bool keep_special_tokens = false;            // delimiters_are_special
};

// Throws tandem::Error unless `name` is one --reasoning-parser takes (checked before a
// model is loaded).
void check_reasoning_parser_name(std::string_view name);

// --reasoning-parser NAME for a model: one of the formats by name; "auto", the one
// `chat_template` names unambiguously (detect_reasoning_format), else none; "none". Throws
// tandem::Error for any other name.
std::optional<ServedReasoning> served_reasoning(std::string_view name, const Tokenizer& tokenizer,
                                                const ModelInfo& info,
                                                const std::optional<std::string>& chat_template);

// One request's thinking, once its prompt is rendered: how its output splits, and the
// engine's part of its row (out.thinking; out.skip_special_tokens off when the delimiters
// are control tokens). `budget`: thinking tokens before the engine ends the block (none:
// unbounded); it does nothing when the prompt turned thinking off. A constrained row
// (out.grammar set) is followed by the engine so its grammar starts after the thinking.
ReasoningSplit prepare_thinking(const ServedReasoning* reasoning, std::string_view prompt,
                                std::optional<int> budget, GenerationRequest& out);

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
