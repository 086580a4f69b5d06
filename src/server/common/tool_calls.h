// Tool calls in generated text, in the two formats open models use:
//   Hermes / Qwen:  <tool_call>{"name": "f", "arguments": {...}}</tool_call>  (repeatable)
//   Llama 3.1 JSON: [<|python_tag|>]{"name": "f", "parameters": {...}}  (the whole output;
//                   several calls separated by ";" or given as a JSON list)
// A block that does not parse as a call stays in the content as text, as vLLM does.
// Ids are left empty: each API formats its own ("call_…", "toolu_…").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

struct ToolCallParse {
  std::string content;  // text outside the calls (trimmed when there are calls)
  std::vector<ToolCall> calls;
};

// A complete generation, split into content and calls.
ToolCallParse parse_tool_calls(std::string_view text);

// The streaming form: text arrives in pieces; content that may still turn out to be part
// of a call is held back (a partial "<tool_call>" at the end, an open block, an output
// that starts like a JSON call), and calls come out whole once their block closes.
// Whitespace-only content is held until more text follows, and dropped if the output
// turns out to contain calls, so calls are not wrapped in stray newlines.
class ToolCallStream {
 public:
  struct Delta {
    std::string content;
    std::vector<ToolCall> calls;
    bool empty() const { return content.empty() && calls.empty(); }
  };

  Delta push(std::string_view text);
  Delta finish();  // end of the generation: flush or parse what is held
  bool saw_calls() const { return num_calls_ > 0; }

 private:
  enum class State { Start, Text, InBlock, Json };
  void step(Delta& out);
  bool step_start();
  bool step_text(Delta& out);
  bool step_block(Delta& out);
  void emit_content(std::string_view text, Delta& out);
  void emit_call(ToolCall call, Delta& out);

  State state_ = State::Start;
  std::string buffer_;      // held text not yet classified
  std::string pending_ws_;  // whitespace-only content waiting for what follows
  int num_calls_ = 0;
};

// Exposed for tests: the Llama-3.1 JSON form alone; nullopt if `text` is not calls.
std::optional<std::vector<ToolCall>> parse_json_tool_calls(std::string_view text);

}  // namespace tandem::server
