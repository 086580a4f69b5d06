#include "server/common/reasoning_setup.h"

#include "core/error.h"

namespace tandem::server {

std::shared_ptr<const ThinkingVocab> make_thinking_vocab(const Tokenizer& tokenizer,
                                                         const ModelInfo& info,
                                                         const ReasoningSyntax& syntax) {
  ThinkingVocabParams p;
  p.token_bytes = tokenizer.token_bytes();
  p.token_bytes.resize(size_t(info.vocab_size));  // ids past the tokenizer write nothing
  for (int32_t eos : info.eos_token_ids)
    if (eos >= 0 && eos < info.vocab_size) p.eos_ids.push_back(eos);
  p.start = std::string(syntax.start);
  p.end = std::string(syntax.end);
  // Tokenized as text is: a delimiter that is an added token comes out as that token.
  p.forced_end = tokenizer.encode(syntax.forced_end, /*add_special_tokens=*/false);
  p.max_space_before_start = kMaxWhitespaceBeforeThinking;
  return std::make_shared<const ThinkingVocab>(std::move(p));
}

bool delimiters_are_special(const Tokenizer& tokenizer, const ReasoningSyntax& syntax) {
  for (std::string_view d : {syntax.start, syntax.end}) {
    std::optional<int32_t> id = tokenizer.token_to_id(d);
    if (id && tokenizer.is_special(*id)) return true;
  }
  return false;
}

std::optional<ThinkingControl> thinking_control(std::shared_ptr<const ThinkingVocab> vocab,
                                                ThinkingStart start, std::optional<int> budget,
                                                bool constrained) {
  if (start == ThinkingStart::Closed || (!budget && !constrained)) return std::nullopt;
  return ThinkingControl{std::move(vocab), start == ThinkingStart::Open, budget};
}

void check_reasoning_parser_name(std::string_view name) {
  if (name != "auto" && name != "none" && !reasoning_format_named(name))
    fail("--reasoning-parser: unknown parser '{}' (known: {})", name, kReasoningParserNames);
}

std::optional<ServedReasoning> served_reasoning(std::string_view name, const Tokenizer& tokenizer,
                                                const ModelInfo& info,
                                                const std::optional<std::string>& chat_template) {
  check_reasoning_parser_name(name);
  std::optional<ReasoningFormat> format = reasoning_format_named(name);
  if (name == "auto" && chat_template) format = detect_reasoning_format(*chat_template);
  if (!format) return std::nullopt;
  const ReasoningSyntax& syntax = reasoning_syntax(*format);
  return ServedReasoning{&syntax, make_thinking_vocab(tokenizer, info, syntax),
                         delimiters_are_special(tokenizer, syntax)};
}

ReasoningSplit prepare_thinking(const ServedReasoning* reasoning, std::string_view prompt,
                                std::optional<int> budget, GenerationRequest& out) {
  if (!reasoning) return {};
  ReasoningSplit split{reasoning->syntax, thinking_start(*reasoning->syntax, prompt)};
  out.thinking = thinking_control(reasoning->vocab, split.start, budget, out.grammar != nullptr);
  // The parser must see the delimiters, even where they are control tokens.
  if (reasoning->keep_special_tokens && split.start != ThinkingStart::Closed)
    out.skip_special_tokens = false;
  return split;
}

}  // namespace tandem::server
