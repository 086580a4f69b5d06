#include "server/common/tool_calls.h"

#include <algorithm>

#include "core/ascii.h"
#include "server/common/bounded_json.h"

namespace tandem::server {
namespace {

constexpr std::string_view kOpenTag = "<tool_call>";
constexpr std::string_view kCloseTag = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
  while (!s.empty() && ascii_is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && ascii_is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool all_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), ascii_is_space);
}

// Model output is parsed under the same limits as client JSON: a model can be made to
// print a million '['.
std::optional<Json> try_parse(std::string_view text) {
  return parse_bounded_json(text, JsonLimits{}).value;
}

// {"name": string, "arguments" | "parameters": object | JSON-object string}.
std::optional<ToolCall> call_from_json(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  ToolCall call{"", name->get<std::string>(), "{}"};
  if (args != j.end() && !args->is_null()) {
    if (args->is_object()) {
      call.arguments = dump_json(*args);
    } else if (args->is_string()) {
      auto parsed = try_parse(args->get_ref<const std::string&>());
      if (!parsed || !parsed->is_object()) return std::nullopt;
      call.arguments = dump_json(*parsed);
    } else {
      return std::nullopt;
    }
  }
  return call;
}

std::optional<ToolCall> parse_block(std::string_view body) {
  auto j = try_parse(trim(body));
  if (!j) return std::nullopt;
  return call_from_json(*j);
}

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// `text` cut at each `sep` outside JSON strings and brackets.
std::vector<std::string_view> split_top_level(std::string_view text, char sep) {
  std::vector<std::string_view> pieces;
  int depth = 0;
  bool in_string = false, escaped = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      ++depth;
    else if (c == '}' || c == ']')
      --depth;
    else if (c == sep && depth == 0) {
      pieces.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

std::optional<std::vector<ToolCall>> calls_from_value(const Json& j) {
  std::vector<ToolCall> calls;
  if (j.is_array()) {
    for (const Json& item : j) {
      auto call = call_from_json(item);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    if (calls.empty()) return std::nullopt;
    return calls;
  }
  auto call = call_from_json(j);
  if (!call) return std::nullopt;
  calls.push_back(std::move(*call));
  return calls;
}

}  // namespace

std::optional<std::vector<ToolCall>> parse_json_tool_calls(std::string_view text) {
  text = trim(text);
  if (text.substr(0, kPythonTag.size()) == kPythonTag) text = trim(text.substr(kPythonTag.size()));
  if (text.empty() || (text.front() != '{' && text.front() != '[')) return std::nullopt;
  if (auto j = try_parse(text)) return calls_from_value(*j);
  // Several calls separated by ";" (Llama 3.1's convention).
  std::vector<ToolCall> calls;
  for (std::string_view piece : split_top_level(text, ';')) {
    piece = trim(piece);
    if (piece.empty()) continue;
    auto j = try_parse(piece);
    auto call = j ? call_from_json(*j) : std::nullopt;
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

ToolCallParse parse_tool_calls(std::string_view text) {
  ToolCallStream stream;
  ToolCallStream::Delta a = stream.push(text);
  ToolCallStream::Delta b = stream.finish();
  ToolCallParse out;
  out.content = a.content + b.content;
  out.calls = std::move(a.calls);
  for (ToolCall& c : b.calls) out.calls.push_back(std::move(c));
  if (!out.calls.empty()) out.content = std::string(trim(out.content));
  return out;
}

void ToolCallStream::emit_content(std::string_view text, Delta& out) {
  if (text.empty()) return;
  if (all_space(text)) {
    pending_ws_ += text;
    return;
  }
  out.content += pending_ws_;
  out.content += text;
  pending_ws_.clear();
}

void ToolCallStream::emit_call(ToolCall call, Delta& out) {
  pending_ws_.clear();  // whitespace between calls is not content
  out.calls.push_back(std::move(call));
  ++num_calls_;
}

// Start: decide between a JSON-call output and ordinary text by the first visible char.
bool ToolCallStream::step_start() {
  std::string_view t = trim(buffer_);
  if (t.empty()) return false;
  bool tag_prefix = kPythonTag.substr(0, std::min(t.size(), kPythonTag.size())) ==
                    t.substr(0, std::min(t.size(), kPythonTag.size()));
  if (tag_prefix && t.size() < kPythonTag.size()) return false;  // wait: may be the tag
  state_ = (t.front() == '{' || t.front() == '[' || tag_prefix) ? State::Json : State::Text;
  return true;
}

bool ToolCallStream::step_text(Delta& out) {
  size_t pos = buffer_.find(kOpenTag);
  if (pos == std::string::npos) {
    size_t keep = partial_tag_suffix(buffer_, kOpenTag);
    emit_content(std::string_view(buffer_).substr(0, buffer_.size() - keep), out);
    buffer_.erase(0, buffer_.size() - keep);
    return false;
  }
  std::string_view before = std::string_view(buffer_).substr(0, pos);
  while (!before.empty() && ascii_is_space(before.back())) before.remove_suffix(1);
  emit_content(before, out);
  buffer_.erase(0, pos + kOpenTag.size());
  state_ = State::InBlock;
  return true;
}

bool ToolCallStream::step_block(Delta& out) {
  size_t pos = buffer_.find(kCloseTag);
  if (pos == std::string::npos) return false;
  std::string_view body = std::string_view(buffer_).substr(0, pos);
  if (auto call = parse_block(body)) {
    emit_call(std::move(*call), out);
  } else {
    emit_content(std::string(kOpenTag) + std::string(body) + std::string(kCloseTag), out);
  }
  buffer_.erase(0, pos + kCloseTag.size());
  state_ = State::Text;
  return true;
}

void ToolCallStream::step(Delta& out) {
  bool progress = true;
  while (progress) {
    switch (state_) {
      case State::Start:
        progress = step_start();
        break;
      case State::Text:
        progress = step_text(out);
        break;
      case State::InBlock:
        progress = step_block(out);
        break;
      case State::Json:
        progress = false;
        break;  // held whole until finish()
    }
  }
}

ToolCallStream::Delta ToolCallStream::push(std::string_view text) {
  Delta out;
  buffer_ += text;
  step(out);
  return out;
}

ToolCallStream::Delta ToolCallStream::finish() {
  Delta out;
  if (state_ == State::Json) {
    if (auto calls = parse_json_tool_calls(buffer_)) {
      for (ToolCall& c : *calls) emit_call(std::move(c), out);
    } else {
      emit_content(buffer_, out);
    }
  } else if (state_ == State::InBlock) {
    // The generation ended inside a block (no closing tag): a complete call still counts.
    if (auto call = parse_block(buffer_)) {
      emit_call(std::move(*call), out);
    } else {
      emit_content(std::string(kOpenTag) + buffer_, out);
    }
  } else {
    emit_content(buffer_, out);
  }
  buffer_.clear();
  if (num_calls_ == 0) out.content += pending_ws_;
  pending_ws_.clear();
  return out;
}

}  // namespace tandem::server
