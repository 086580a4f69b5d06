// Reasoning parsers (issue 43): a thinking model writes its reasoning between two
// delimiters before its answer; the APIs return the two apart (OpenAI-style
// `reasoning_content`, Anthropic `thinking` blocks). This file splits one row's generated
// text into reasoning and content, streaming-safe: text arrives in pieces, a delimiter may
// be cut between two of them, and the split of the whole equals the split of its pieces.
//
// The formats (`--reasoning-parser NAME`):
//   qwen3        <think> … </think>   Qwen3, Qwen3.5, QwQ, and ChatML thinkers alike
//   deepseek_r1  <think> … </think>   DeepSeek-R1 and its distills, DeepSeek-V3.1/V3.2
//   glm45        <think> … </think>   GLM-4.5, 4.6, 4.7
//   gemma4       <|channel>thought\n … <channel|>   Gemma 4 (its delimiters are control
//                tokens: the row's text must keep special tokens to see them)
//   auto         the one the chat template names unambiguously (its role markers beside
//                its thinking delimiters), else none.
// The three <think> formats read the same once the prompt is known: where a row starts is
// read off the end of its rendered prompt (thinking_start), not guessed per model. A
// template that opens the block itself (DeepSeek-R1's "<｜Assistant｜><think>\n", Qwen3.5's
// "<think>\n", GLM-4.7's "<think>") starts the row inside it; one that writes an empty
// block (enable_thinking false: "<think>\n\n</think>\n\n", "<think></think>") or a closing
// delimiter starts it in the answer; otherwise the model may open a block as its first
// output (Qwen3, GLM-4.6, Gemma 4 with enable_thinking).
//
// Whitespace: the reasoning is trimmed at both ends, the content's leading whitespace after
// a closing delimiter is dropped (the templates strip both when they render a past turn);
// content of a row that never thought is passed through untouched.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::server {

enum class ReasoningFormat : uint8_t { Qwen3, DeepSeekR1, Glm45, Gemma4 };

// How a format writes its thinking.
struct ReasoningSyntax {
  std::string_view name;   // the --reasoning-parser name
  std::string_view start;  // opens the thinking block
  std::string_view end;    // closes it
  // Text right after `start` that labels the block rather than being part of it (Gemma 4's
  // channel name); dropped.
  std::string_view label;
  // What the server appends when a thinking budget runs out (the engine forces its tokens):
  // a line break, then `end`. It ends with `end`, so the answer starts right after it.
  std::string_view forced_end;
};

const ReasoningSyntax& reasoning_syntax(ReasoningFormat format);
// "qwen3", "deepseek_r1", "glm45", "gemma4" (not "auto"); nullopt for other names.
std::optional<ReasoningFormat> reasoning_format_named(std::string_view name);
// `auto`: the format whose role markers and delimiters the chat template holds, when
// exactly one does (ChatML <|im_start|> → qwen3, <｜Assistant｜> → deepseek_r1,
// <|assistant|> → glm45, each with </think>; <|channel>/<channel|> → gemma4); else none.
std::optional<ReasoningFormat> detect_reasoning_format(std::string_view chat_template);

// Where a row's output starts, read off the end of its rendered prompt.
enum class ThinkingStart : uint8_t {
  MayOpen,  // the model may open a block as its first output (after a little whitespace)
  Open,     // the prompt opened the block: the output starts as reasoning
  Closed,   // the prompt closed it (thinking off): the output is all content
};
ThinkingStart thinking_start(const ReasoningSyntax& syntax, std::string_view prompt);

// Whitespace a model may write before opening its block (GLM writes "\n<think>"); past
// this much, the output is content. The engine's reasoning state reads it the same way.
constexpr size_t kMaxWhitespaceBeforeThinking = 8;

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
  void append(const ReasoningDelta& d) {
    reasoning += d.reasoning;
    content += d.content;
  }
};

// One row's splitter. Holds back only what may still turn out to be a delimiter, the
// label, or whitespace that trimming may drop; everything else comes out at once.
class ReasoningParser {
 public:
  ReasoningParser(const ReasoningSyntax& syntax, ThinkingStart start);

  ReasoningDelta push(std::string_view text);
  ReasoningDelta finish();  // end of the output: what is held comes out (trimmed)

  // Whether the output so far is inside the thinking block (or may still open one).
  bool in_reasoning() const { return state_ != State::Content && state_ != State::AfterEnd; }
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class State : uint8_t {
    Opening,    // MayOpen: leading whitespace, then the start or content
    Reopening,  // Open: the model may repeat the start the prompt wrote; else reasoning
    Label,      // right after the start: the label, or reasoning
    Thinking,   // inside the block
    AfterEnd,   // after the end: whitespace dropped until the content begins
    Content,
  };
  // Each step consumes some of buffer_ and says whether it can go on without more text.
  bool step(ReasoningDelta& out, bool at_end);
  bool step_opening(ReasoningDelta& out, bool at_end);
  bool step_label(bool at_end);
  bool step_thinking(ReasoningDelta& out, bool at_end);
  bool step_after_end(bool at_end);
  void emit_reasoning(std::string_view text, ReasoningDelta& out);

  const ReasoningSyntax& syntax_;
  State state_;
  std::string buffer_;  // text not yet classified
  bool reasoning_started_ = false;  // some reasoning text has been emitted
  bool saw_reasoning_ = false;      // the output entered a thinking block
};

// The whole output at once: what push(text) + finish() give.
ReasoningDelta split_reasoning(const ReasoningSyntax& syntax, ThinkingStart start,
                               std::string_view text);

}  // namespace tandem::server
