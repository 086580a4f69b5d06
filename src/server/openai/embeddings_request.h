// POST /v1/embeddings: the body, validated (OpenAI's fields, and vLLM's `normalize`,
// `add_special_tokens` and `truncate_prompt_tokens`). Each input becomes one engine request
// (openai/embeddings_endpoint.cpp); data[i] answers input[i].
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "server/common/json_text.h"
#include "server/common/server_limits.h"
#include "server/openai/prompt_inputs.h"

namespace tandem::server {

struct EmbeddingsRequest {
  std::vector<PromptInput> inputs;   // at least one; texts are tokenized by the endpoint
  std::optional<std::string> model;  // the adapter it names, or the base model's name
  bool base64 = false;               // encoding_format: "float" (default) or "base64"
  // Matryoshka truncation: the first `dimensions` values (then normalized), 1..hidden size.
  std::optional<int> dimensions;
  bool normalize = true;           // L2, vLLM's field; false: the raw pooled vector
  bool add_special_tokens = true;  // for text inputs (vLLM's default)
  // Keep only the last k tokens of each input (vLLM's truncate_prompt_tokens; -1 in the
  // request: the context length); none: an input past the context is refused.
  std::optional<int> truncate_prompt_tokens;
};

// Refuses (400, naming the field) what the model cannot answer: no or empty inputs, more
// than RequestLimits::max_sequences of them (--max-request-sequences), ids outside the
// vocabulary, an encoding_format other than float and base64, dimensions above the
// model's hidden size.
EmbeddingsRequest parse_embeddings_request(const Json& body, const ModelInfo& model,
                                           const RequestLimits& limits);

}  // namespace tandem::server
