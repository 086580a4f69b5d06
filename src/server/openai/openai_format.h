// Pieces of OpenAI's response shapes that chat and completions share.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "engine/request.h"
#include "server/common/json_text.h"
#include "server/common/stream_encoder.h"
#include "server/common/tool_calls.h"

namespace tandem::server {

// "stop", "length", "tool_calls" (a stop with calls parsed), "abort", "error".
const char* openai_finish_reason(FinishReason reason, bool has_tool_calls);

// vLLM's `stop_reason`: the stop string that ended the choice, else null.
Json openai_stop_reason(const std::string& matched_stop);

struct TokenUsage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // of the prompt tokens, those read from the prefix cache
};

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}.
Json openai_usage(const TokenUsage& usage);

// Prompt tokens read from the prefix cache over a request's choices: choices
// [k·n, (k+1)·n) share prompt k, which counts what the best of them found.
int cached_prompt_tokens(std::span<const int> per_choice, int choices_per_prompt);

// OpenAI's tool call object, with a fresh "call_…" id; streamed ones carry their index.
Json openai_tool_call(const ToolCall& call, std::optional<int> index = std::nullopt);

// The end of a stream: the usage chunk (object "chat.completion.chunk" or
// "text_completion") when the client asked for it, then [DONE].
std::string openai_stream_end(const ResponseMeta& meta, const char* object, bool include_usage,
                              const TokenUsage& usage);

// A failure after the stream has started: an error event, then [DONE].
std::string openai_stream_error(const std::string& message);

}  // namespace tandem::server
