// POST /v1/chat/completions: the request body, validated, as a conversation for the
// chat template plus everything the engine needs except the prompt ids (which need the
// template) and max_tokens (which needs the prompt's length): see chat_endpoint.
#pragma once

#include <optional>

#include "engine/request.h"
#include "server/common/chat_prompt.h"
#include "server/common/json_text.h"
#include "server/common/request_fields.h"
#include "server/common/server_limits.h"
#include "server/common/structured_output.h"

namespace tandem::server {

struct ChatCompletionRequest {
  ChatPromptInput prompt;
  GenerationRequest generation;       // sampling, stops, logprobs; prompt empty
  std::optional<int64_t> max_tokens;  // max_completion_tokens, else max_tokens
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  int top_logprobs = -1;          // -1: no logprobs; else the alternatives per token
  bool parse_tool_calls = false;  // tools were given and tool_choice is not "none"
  OutputConstraint constraint;    // response_format, structured_outputs
  ToolForcing forced_tools;       // tool_choice "required" or a named function
};

// `defaults` carries the model's sampling defaults; `vocab_size` bounds token ids.
ChatCompletionRequest parse_chat_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits = {});

}  // namespace tandem::server
