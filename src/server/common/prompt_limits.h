// The checks that need the prompt's length: it must fit the context with room for at
// least one token, its ids must be in the vocabulary, and max_tokens (given or chosen)
// must fit what is left. The messages follow vLLM's, which clients already match on.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/engine_api.h"
#include "server/common/prompt_bound.h"
#include "server/common/server_limits.h"

namespace tandem::server {

struct PromptFieldNames {
  const char* prompt = "messages";        // the field the prompt came from
  const char* max_tokens = "max_tokens";  // the field max_tokens came from
};

// Every id in [0, vocab_size); a 400 naming `param` otherwise.
void check_token_ids(std::span<const int32_t> ids, int vocab_size, const char* param);

// Refuses, before tokenizing, a text of `bytes` bytes that `bound` shows cannot fit the
// context (a 400 context_length_exceeded naming `field`).
void check_prompt_length(size_t bytes, const PromptBound& bound, const ModelInfo& model,
                         const char* field);

// Refuses a request whose prompts, over all its choices, add up to more than
// RequestLimits::max_prompt_tokens (--max-request-tokens).
void check_request_tokens(int64_t total, const RequestLimits& limits, const char* field);

// Fills request.max_tokens: `requested`, or the rest of the context capped by
// `default_cap` (nullopt: no cap). 400 for an empty prompt, a prompt that leaves no room,
// a max_tokens that does not fit, and min_tokens above max_tokens.
void fit_to_context(GenerationRequest& request, const ModelInfo& model,
                    std::optional<int64_t> requested, std::optional<int64_t> default_cap,
                    const PromptFieldNames& names);

}  // namespace tandem::server
