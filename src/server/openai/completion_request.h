// POST /v1/completions: the body, validated. `prompt` may be a text, a list of texts,
// a list of token ids, or a list of token-id lists; each prompt gets n choices, and
// choice k of prompt p is choice index p * n + k (OpenAI's order).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/common/generation_fields.h"
#include "server/common/json_text.h"
#include "server/common/server_limits.h"
#include "server/common/structured_output.h"
#include "server/openai/prompt_inputs.h"

namespace tandem::server {

using CompletionPrompt = PromptInput;  // a text or token ids (prompt_inputs.h)

// max_tokens: default 16 (OpenAI's and vLLM's).
struct CompletionRequest : GenerationFields {
  std::vector<CompletionPrompt> prompts;
  int n = 1;
  bool include_usage = false;
  bool echo = false;
  int logprobs = -1;               // -1: none; k: the chosen token and k alternatives
  bool return_token_ids = false;   // token_ids and prompt_token_ids in each choice
  bool add_special_tokens = true;  // for text prompts (vLLM's default)
  OutputConstraint constraint;     // response_format, structured_outputs, json_schema, grammar
};

inline constexpr int64_t kDefaultCompletionMaxTokens = 16;

CompletionRequest parse_completion_request(const Json& body, const GenerationRequest& defaults,
                                           int vocab_size, const RequestLimits& limits = {});

}  // namespace tandem::server
