#include "server/common/prompt_limits.h"

#include <algorithm>

#include "server/common/api_error.h"

namespace tandem::server {

void check_token_ids(std::span<const int32_t> ids, int vocab_size, const char* param) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      invalid_request(param, "Token id {} at position {} is out of the vocabulary [0, {})", ids[i],
                      i, vocab_size);
}

void check_prompt_length(size_t bytes, const PromptBound& bound, const ModelInfo& model,
                         const char* field) {
  int64_t at_least = bound.min_tokens(bytes);
  if (at_least < model.max_model_len) return;
  throw ApiError(400, "invalid_request_error",
                 fmt::format("This model's maximum context length is {} tokens. However, your "
                             "prompt is {} bytes, which is at least {} tokens, leaving no room "
                             "for a completion. Please reduce the length of the prompt.",
                             model.max_model_len, bytes, at_least),
                 field, "context_length_exceeded");
}

void check_request_tokens(int64_t total, const RequestLimits& limits, const char* field) {
  if (total > limits.max_prompt_tokens)
    invalid_request(field,
                    "The request's prompts add up to {} tokens over all its choices; at most {} "
                    "are allowed (--max-request-tokens)",
                    total, limits.max_prompt_tokens);
}

void fit_to_context(GenerationRequest& request, const ModelInfo& model,
                    std::optional<int64_t> requested, std::optional<int64_t> default_cap,
                    const PromptFieldNames& names) {
  int64_t context = model.max_model_len;
  int64_t prompt = int64_t(request.prompt.size());
  if (prompt == 0) invalid_request(names.prompt, "The prompt is empty (it has no tokens)");
  // Scoring a prompt (max_tokens 0) needs no room after it.
  if (prompt > context || (prompt == context && requested != std::optional<int64_t>(0)))
    throw ApiError(400, "invalid_request_error",
                   fmt::format("This model's maximum context length is {} tokens. However, your "
                               "prompt has {} tokens, leaving no room for a completion. Please "
                               "reduce the length of the prompt.",
                               context, prompt),
                   names.prompt, "context_length_exceeded");
  int64_t room = context - prompt;
  if (requested && *requested > room)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("This model's maximum context length is {} tokens. However, you "
                               "requested {} tokens ({} in the prompt, {} in the completion). "
                               "Please reduce the length of the prompt or completion.",
                               context, prompt + *requested, prompt, *requested),
                   names.max_tokens, "context_length_exceeded");
  int64_t max_tokens = requested ? *requested : std::min(room, default_cap.value_or(room));
  request.max_tokens = int(max_tokens);
  if (request.min_tokens > request.max_tokens)
    invalid_request("min_tokens", "'min_tokens' ({}) must not exceed '{}' ({})", request.min_tokens,
                    names.max_tokens, request.max_tokens);
}

}  // namespace tandem::server
