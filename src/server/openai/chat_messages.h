// Conversation input, validated and put in the one shape chat templates expect (Hugging
// Face's: a list of {"role", "content": string, "tool_calls"?, "tool_call_id"?, "name"?}).
// OpenAI chat messages, Anthropic messages and Responses API input all end up here, so
// the template sees the same thing whichever API the client speaks.
#pragma once

#include "server/common/json_text.h"
#include "server/common/server_limits.h"
#include "server/common/structured_output.h"

namespace tandem::server {

// OpenAI `messages`: roles system/developer/user/assistant/tool; content a string or a
// list of text parts (joined with "\n", as vLLM does); assistant tool_calls with their
// JSON-string arguments parsed into objects (templates render them with `tojson`) within
// `limits` (past them: a 400 naming the field); an assistant turn without content gets ""
// (as vLLM does). Non-text parts, unknown roles, missing user/system/tool content and an
// empty list are 400s.
Json normalize_openai_messages(const Json& messages, const JsonLimits& limits = {});

// OpenAI `tools`: [{"type": "function", "function": {"name", "description"?,
// "parameters"?}}], checked and passed through in order. Returns null for no tools.
Json normalize_openai_tools(const Json* tools);

// OpenAI `tool_choice`: "none" | "auto" | "required" | {"type": "function",
// "function": {"name"}}. Returns false when tool calls must not be parsed ("none").
bool tool_choice_allows_calls(const Json* tool_choice);
// What it forces: "required" a call to any tool, {"function": {"name"}} that one.
ToolForcing openai_tool_forcing(const Json* tool_choice);

// Anthropic `system` (string or text blocks) and `messages` (user/assistant turns with
// text, tool_use and tool_result blocks) as chat-template messages: tool_use becomes an
// assistant tool_call, tool_result a "tool" message.
Json anthropic_to_chat_messages(const Json* system, const Json& messages);

// Anthropic `tools` ([{"name", "description"?, "input_schema"}]) as OpenAI-style tools.
Json anthropic_tools_to_chat(const Json* tools);

// Text of a content value: a string, or a list of text blocks joined with "\n". `path`
// names the field in errors; `text_types` are the accepted block types ("text", ...).
std::string content_text(const Json& content, const std::string& path,
                         std::initializer_list<const char*> text_types);

}  // namespace tandem::server
