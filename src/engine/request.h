// What a client asks the engine for, and what flows back. This is the contract between
// the HTTP threads (server/) and the engine thread: requests go in through
// Engine::submit(), results come back on the request's own RequestStream.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/pooling.h"
#include "media/image_input.h"

namespace tandem {

namespace grammar {
class CompiledGrammar;
}
class ThinkingVocab;

struct SamplingParams {
  float temperature = 1.f;  // 0 = greedy
  float top_p = 1.f;        // 1 = off
  int top_k = 0;            // 0 = off
  float min_p = 0.f;        // 0 = off
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  float repetition_penalty = 1.f;  // 1 = off (HF's definition: divide positive logits)
  std::optional<uint64_t> seed;    // per-request RNG stream: same seed, same tokens

  bool greedy() const { return temperature <= 0.f; }
};

// Log-probabilities of the prompt's own tokens, each given every token before it, read
// off the logits the prefill computes (only the rows asked for leave the device).
struct PromptLogprobs {
  int first = 1;  // prompt positions [first, prompt size) get one; position 0 never has one
  int top = 0;    // and the `top` best alternatives of each (at most 20)
};

// A row of a thinking model (issue 43; engine/reasoning_state.h has the rules): the model's
// thinking delimiters as tokens, whether the prompt opened the block, and how many tokens
// the row may think before the engine closes the block itself.
struct ThinkingControl {
  std::shared_ptr<const ThinkingVocab> vocab;  // built once per model (engine/thinking_vocab.h)
  bool starts_open = false;
  std::optional<int> budget;  // none: unbounded (max_tokens still bounds the whole output)
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, already templated and tokenized
  // The prompt's images, in order, not overlapping (media/image_input.h); empty for text.
  std::vector<MediaSpan> media;
  SamplingParams sampling;
  int max_tokens = 16;          // generated tokens at most; 0 only with prompt_logprobs
  int min_tokens = 0;           // EOS and stop strings are ignored before this many
  bool ignore_eos = false;
  std::vector<std::string> stop;        // never emitted, even across token boundaries
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS ids
  int top_logprobs = -1;                // -1: no logprobs; 0: chosen token's; k: and top k
  bool skip_special_tokens = true;      // in the emitted text
  // What the output must be (grammar/grammar.h), compiled by the server for the engine's
  // vocabulary; null: unconstrained. The grammar decides when a constrained row ends: EOS
  // is allowed exactly when the output is complete (ignore_eos and min_tokens do not apply)
  // and the row stops once nothing but EOS could follow.
  std::shared_ptr<grammar::CompiledGrammar> grammar;
  // Set for a thinking row: the engine follows its thinking block, applies its budget, and
  // starts its grammar (above) only where the block ends: the thinking is free text.
  std::optional<ThinkingControl> thinking;
  // The LoRA adapter to run with, by the name it was loaded under (Engine::load_lora);
  // none: the base model.
  std::optional<std::string> lora;
  // Speculative decoding (the server's --speculative-config) applies to this request;
  // false opts out (the API's "speculative_decoding": false). The output is the same
  // either way (exactly for greedy and seeded n-gram rows, in distribution for sampled
  // draft-model rows); only its speed differs.
  bool speculative = true;
  // Prefix-cache isolation: only requests with the same salt share cached KV blocks.
  std::string cache_salt;
  // Scores of the prompt's tokens (the positions asked for are always computed: a
  // prefix-cache hit stops short of them). With max_tokens 0 the request ends, finish
  // Length, once its prompt is computed.
  std::optional<PromptLogprobs> prompt_logprobs;
  // An embedding request (engine/pooling.h): max_tokens 0, no sampling; its last chunk
  // carries the pooled final hidden state (StreamChunk::embedding) instead of tokens.
  std::optional<Pooling> pooling;
};

enum class FinishReason : uint8_t { Stop, Length, Cancelled, Error };

inline const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.f;
};

// One generated token as it leaves the engine.
struct GeneratedToken {
  int32_t token = 0;
  float logprob = 0.f;                      // when requested
  std::vector<TokenLogprob> top_logprobs;   // when requested, best first
};

// A chunk of output. Tokens and text advance independently: `text` is the newly
// complete, stop-string-safe text (it may lag the tokens by a few bytes of a partial
// UTF-8 character or a possible stop-string prefix, never more).
struct StreamChunk {
  std::vector<GeneratedToken> tokens;
  std::string text;
  std::optional<FinishReason> finish;  // set on the last chunk of a request
  std::string matched_stop;            // the stop string that ended it, if any
  std::string error;                   // set when finish == Error
  bool server_error = false;           // the engine failed (a 5xx), not the request (a 4xx)
  int prompt_tokens = 0;               // set on the last chunk
  int completion_tokens = 0;           // set on the last chunk
  int cached_tokens = 0;               // set on the last chunk: prompt tokens read from the prefix cache
  // GenerationRequest::prompt_logprobs: one entry per prompt position asked for, in
  // order, on the first chunk of the request that carries any (token: the prompt's).
  std::vector<GeneratedToken> prompt_logprobs;
  // GenerationRequest::pooling: on the last chunk, the pooled vector [hidden] f32 (not
  // normalized).
  std::vector<float> embedding;
};

}  // namespace tandem
