#include "server/common/reasoning_parser.h"

#include <algorithm>
#include <array>

#include "core/ascii.h"

namespace tandem::server {

namespace {

constexpr std::array<ReasoningSyntax, 4> kSyntaxes = {{
    {"qwen3", "<think>", "</think>", "", "\n</think>"},
    {"deepseek_r1", "<think>", "</think>", "", "\n</think>"},
    {"glm45", "<think>", "</think>", "", "\n</think>"},
    {"gemma4", "<|channel>", "<channel|>", "thought\n", "\n<channel|>"},
}};

size_t leading_space(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && ascii_is_space(s[n])) ++n;
  return n;
}

std::string_view trim_end(std::string_view s) {
  while (!s.empty() && ascii_is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The longest suffix of text that is a proper prefix of delim (a delimiter that may be
// completed by the text to come).
size_t partial_suffix(std::string_view text, std::string_view delim) {
  for (size_t n = std::min(text.size(), delim.size() - 1); n > 0; --n)
    if (delim.starts_with(text.substr(text.size() - n))) return n;
  return 0;
}

bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

}  // namespace

const ReasoningSyntax& reasoning_syntax(ReasoningFormat format) {
  return kSyntaxes[size_t(format)];
}

std::optional<ReasoningFormat> reasoning_format_named(std::string_view name) {
  for (size_t i = 0; i < kSyntaxes.size(); ++i)
    if (kSyntaxes[i].name == name) return ReasoningFormat(i);
  return std::nullopt;
}

std::optional<ReasoningFormat> detect_reasoning_format(std::string_view chat_template) {
  const bool think = contains(chat_template, "</think>");
  const std::pair<ReasoningFormat, bool> signs[] = {
      {ReasoningFormat::Qwen3, think && contains(chat_template, "<|im_start|>")},
      {ReasoningFormat::DeepSeekR1, think && contains(chat_template, "<｜Assistant｜>")},
      {ReasoningFormat::Glm45, think && contains(chat_template, "<|assistant|>")},
      {ReasoningFormat::Gemma4,
       contains(chat_template, "<|channel>") && contains(chat_template, "<channel|>")},
  };
  std::optional<ReasoningFormat> found;
  for (const auto& [format, matches] : signs) {
    if (!matches) continue;
    if (found) return std::nullopt;  // two formats' markers: ambiguous
    found = format;
  }
  return found;
}

ThinkingStart thinking_start(const ReasoningSyntax& syntax, std::string_view prompt) {
  std::string_view tail = trim_end(prompt);
  if (tail.ends_with(syntax.end)) return ThinkingStart::Closed;
  if (tail.ends_with(syntax.start)) return ThinkingStart::Open;
  // The start and its label, written by the template ("<|channel>thought\n").
  std::string_view label = trim_end(syntax.label);
  if (!label.empty() && tail.ends_with(label) &&
      trim_end(tail.substr(0, tail.size() - label.size())).ends_with(syntax.start))
    return ThinkingStart::Open;
  return ThinkingStart::MayOpen;
}

ReasoningParser::ReasoningParser(const ReasoningSyntax& syntax, ThinkingStart start)
    : syntax_(syntax) {
  switch (start) {
    case ThinkingStart::MayOpen: state_ = State::Opening; break;
    case ThinkingStart::Open: state_ = State::Reopening; break;
    case ThinkingStart::Closed: state_ = State::Content; break;
  }
  saw_reasoning_ = start == ThinkingStart::Open;
}

ReasoningDelta ReasoningParser::push(std::string_view text) {
  buffer_ += text;
  ReasoningDelta out;
  while (!buffer_.empty() && step(out, false)) {
  }
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  while (!buffer_.empty() && step(out, true)) {
  }
  buffer_.clear();
  return out;
}

bool ReasoningParser::step(ReasoningDelta& out, bool at_end) {
  switch (state_) {
    case State::Opening:
    case State::Reopening:
      return step_opening(out, at_end);
    case State::Label:
      return step_label(at_end);
    case State::Thinking:
      return step_thinking(out, at_end);
    case State::AfterEnd:
      return step_after_end(at_end);
    case State::Content:
      out.content += buffer_;
      buffer_.clear();
      return false;
  }
  return false;
}

// Leading whitespace, then the start (into the block) or anything else: content when the
// model may open a block, reasoning when the prompt opened it already.
bool ReasoningParser::step_opening(ReasoningDelta& out, bool at_end) {
  const size_t space = leading_space(buffer_);
  std::string_view rest = std::string_view(buffer_).substr(space);
  const bool within = space <= kMaxWhitespaceBeforeThinking;
  if (within && rest.starts_with(syntax_.start)) {
    buffer_.erase(0, space + syntax_.start.size());
    state_ = State::Label;
    saw_reasoning_ = true;
    return true;
  }
  const bool may_still_open = within && syntax_.start.starts_with(rest);  // rest may be ""
  if (may_still_open && !at_end) return false;
  if (state_ == State::Reopening) {
    state_ = State::Thinking;
    return true;
  }
  state_ = State::Content;
  return true;
}

bool ReasoningParser::step_label(bool at_end) {
  std::string_view label = syntax_.label;
  if (!label.empty() && std::string_view(buffer_).starts_with(label)) {
    buffer_.erase(0, label.size());
  } else if (!label.empty() && label.starts_with(buffer_)) {
    if (!at_end) return false;  // may still be the label
    buffer_.clear();            // the output stopped inside the label: it was the label
  }
  state_ = State::Thinking;
  return true;
}

bool ReasoningParser::step_thinking(ReasoningDelta& out, bool at_end) {
  const size_t end = buffer_.find(syntax_.end);
  if (end != std::string::npos) {
    emit_reasoning(trim_end(std::string_view(buffer_).substr(0, end)), out);
    buffer_.erase(0, end + syntax_.end.size());
    state_ = State::AfterEnd;
    return true;
  }
  std::string_view text = buffer_;
  if (at_end) {  // no end came: all of it is reasoning, the trailing whitespace trimmed
    emit_reasoning(trim_end(text), out);
    buffer_.clear();
    return false;
  }
  // Hold a possible start of the end delimiter, and the whitespace before it (it is trimmed
  // if the end follows).
  std::string_view safe = trim_end(text.substr(0, text.size() - partial_suffix(text, syntax_.end)));
  emit_reasoning(safe, out);
  buffer_.erase(0, safe.size());
  return false;
}

bool ReasoningParser::step_after_end(bool at_end) {
  const size_t space = leading_space(buffer_);
  buffer_.erase(0, space);
  if (buffer_.empty() && !at_end) return false;
  state_ = State::Content;
  return true;
}

void ReasoningParser::emit_reasoning(std::string_view text, ReasoningDelta& out) {
  if (!reasoning_started_) text.remove_prefix(leading_space(text));  // trimmed at the start
  if (text.empty()) return;
  reasoning_started_ = true;
  out.reasoning += text;
}

ReasoningDelta split_reasoning(const ReasoningSyntax& syntax, ThinkingStart start,
                               std::string_view text) {
  ReasoningParser parser(syntax, start);
  ReasoningDelta out = parser.push(text);
  out.append(parser.finish());
  return out;
}

}  // namespace tandem::server
