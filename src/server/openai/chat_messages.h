// OpenAI conversation input, validated and put in the one shape chat templates expect
// (Hugging Face's: a list of {"role", "content": string, "tool_calls"?, "tool_call_id"?,
// "name"?}): chat completions' `messages`, and the Responses API's `input` once its items
// are read (responses_request.cpp). Anthropic's turns reach the same shape through
// anthropic/anthropic_messages.h, so the template sees one thing whichever API the client
// speaks.
#pragma once

#include <vector>

#include "server/common/image_parts.h"
#include "server/common/json_text.h"
#include "server/common/server_limits.h"
#include "server/common/structured_output.h"

namespace tandem::server {

// How normalize_openai_messages reads each message's content (common/content_parts.h).
struct MessageContent {
  // Receives the image_url parts of user turns, in order; null: image parts are 400s.
  std::vector<ImagePart>* images = nullptr;
  // The content is already in the template's shape (the Responses API reads its own input
  // items, naming their own paths in errors): taken as it is.
  bool already_read = false;
};

// OpenAI `messages`: roles system/developer/user/assistant/tool; content a string or a
// list of text parts (joined with "\n", as vLLM does) and, in user turns, image_url parts
// (as `content` says); assistant tool_calls with their JSON-string arguments parsed into
// objects (templates render them with `tojson`) within `limits` (past them: a 400 naming
// the field); an assistant turn without content gets "" (as vLLM does). Other parts,
// unknown roles, missing user/system/tool content and an empty list are 400s.
Json normalize_openai_messages(const Json& messages, const JsonLimits& limits = {},
                               MessageContent content = {});

// OpenAI `tools`: [{"type": "function", "function": {"name", "description"?,
// "parameters"?}}], checked and passed through in order. Returns null for no tools.
Json normalize_openai_tools(const Json* tools);

// OpenAI `tool_choice`: "none" | "auto" | "required" | {"type": "function",
// "function": {"name"}}. Returns false when tool calls must not be parsed ("none").
bool tool_choice_allows_calls(const Json* tool_choice);
// What it forces: "required" a call to any tool, {"function": {"name"}} that one.
ToolForcing openai_tool_forcing(const Json* tool_choice);

}  // namespace tandem::server
