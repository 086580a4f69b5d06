// The prompt shapes OpenAI's APIs share: /v1/completions' `prompt` and /v1/embeddings'
// `input` are each a text, a list of texts, a list of token ids, or a list of token-id
// lists (told apart by the first element; a list may not mix them).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/common/json_text.h"

namespace tandem::server {

struct PromptInput {
  std::optional<std::string> text;  // a text prompt (tokenized by the endpoint)
  std::vector<int32_t> ids;         // a token-id prompt, checked against the vocabulary
};

// `value` is the request's `field`; every failure is a 400 naming it (and the item's path).
// Token ids must be in [0, vocab_size) and id lists non-empty; texts are taken as given.
std::vector<PromptInput> read_prompt_inputs(const Json& value, const char* field, int vocab_size);

}  // namespace tandem::server
