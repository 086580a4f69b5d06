// POST /v1/chat/completions: the request body, validated, as a conversation for the
// chat template plus everything the engine needs except the prompt ids (which need the
// template) and max_tokens (which needs the prompt's length): see chat_endpoint.
#pragma once

#include "engine/request.h"
#include "server/common/generation_fields.h"
#include "server/common/json_text.h"
#include "server/common/server_limits.h"

namespace tandem::server {

// max_tokens: max_completion_tokens, else max_tokens.
struct ChatCompletionRequest : ChatGeneration {
  int n = 1;
  bool include_usage = false;
  int top_logprobs = -1;  // -1: no logprobs; else the alternatives per token
  bool return_token_ids = false;  // vLLM's: prompt_token_ids and choices[i].token_ids
};

// `defaults` carries the model's sampling defaults; `vocab_size` bounds token ids.
ChatCompletionRequest parse_chat_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits = {});

}  // namespace tandem::server
