// Log probabilities in the two OpenAI shapes:
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{...}]}]}
//   completions: {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}
// A token's text is its own decoding (possibly half a UTF-8 character: "bytes" then holds
// the exact bytes and "token" shows U+FFFD for the missing part).
#pragma once

#include <functional>
#include <span>
#include <string>

#include "engine/request.h"
#include "server/common/json_text.h"

namespace tandem::server {

// The text of one token, special tokens included.
using TokenText = std::function<std::string(int32_t token)>;

// OpenAI's floor for log probabilities JSON can carry (-inf is not a JSON number).
float finite_logprob(float logprob);

// Chat: the entries for `tokens`; `top_n` of each token's alternatives.
Json chat_logprobs_content(std::span<const GeneratedToken> tokens, int top_n,
                           const TokenText& token_text);

// Completions: `text_offset` starts at `offset`, which advances past the tokens' text.
Json completion_logprobs(std::span<const GeneratedToken> tokens, int top_n,
                         const TokenText& token_text, size_t& offset);

// Completions with echo: the prompt's tokens in the same shape (text_offset from `offset`,
// which advances); the first token has no log-probability (null, and null top_logprobs),
// token p > 0 has scored[p - 1] (null too where `scored` is shorter).
Json echo_logprobs(std::span<const int32_t> prompt, std::span<const GeneratedToken> scored,
                   int top_n, const TokenText& token_text, size_t& offset);

// `b`'s entries appended to `a`'s (both in the completions shape).
void append_logprobs(Json& a, Json b);

}  // namespace tandem::server
