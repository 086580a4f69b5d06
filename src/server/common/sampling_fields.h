// The sampling and stopping fields every generation API shares (OpenAI chat and
// completions, Anthropic messages, Responses), read once into a GenerationRequest.
// Ranges follow OpenAI's documentation where it states one, vLLM's otherwise.
#pragma once

#include "engine/request.h"
#include "server/common/request_fields.h"
#include "server/common/server_limits.h"

namespace tandem::server {

struct SamplingFieldSpec {
  const char* stop_field = "stop";  // Anthropic: "stop_sequences"
  bool stop_may_be_string = true;   // OpenAI's stop: a string or a list; Anthropic's: a list
  double max_temperature = 2.0;     // Anthropic: 1.0
  size_t max_stop_strings = 16;     // RequestLimits::max_stop_strings
  size_t max_stop_bytes = 1024;     // RequestLimits::max_stop_bytes
};

// The spec of an API whose stop field is `stop_field`, bounded by `limits`; "stop_sequences"
// (Anthropic's) takes a list only, as the API defines it.
SamplingFieldSpec sampling_spec(const RequestLimits& limits, const char* stop_field = "stop");

// Reads temperature, top_p, top_k, min_p, presence/frequency/repetition penalties, seed,
// the stop strings, and vLLM's extensions (stop_token_ids, min_tokens, ignore_eos,
// skip_special_tokens, cache_salt) and tandem's speculative_decoding (false: the request
// opts out of --speculative-config) into `out`. Fields not given keep `out`'s values (the model's
// defaults). `vocab_size` bounds stop_token_ids.
void read_sampling_fields(const FieldReader& fields, const SamplingFieldSpec& spec, int vocab_size,
                          GenerationRequest& out);

// Copies of `base` for `n` choices; a seeded request gives choice i the seed + i, so the
// choices differ but the whole response is reproducible.
std::vector<GenerationRequest> expand_choices(const GenerationRequest& base, int n);

}  // namespace tandem::server
