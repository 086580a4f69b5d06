// Speculative decoding's configuration (`--speculative-config JSON`, vLLM's spelling;
// docs/speculative-decoding.md): how a row's proposals are made and how many a step may
// verify. Parsed and checked once; the engine only reads it.
//
//   {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
//   {"model": "DIR", "num_speculative_tokens": 4}      (method "draft_model" implied)
//
// tandem's own key: "adaptive" (default true): K per row follows its acceptance and a step
// speculates only when the measured step costs say it pays (engine/spec_controller.h);
// false verifies num_speculative_tokens proposals whenever a row has them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

enum class SpecMethod : uint8_t {
  Ngram,       // proposals looked up in the row's own prompt and output (engine/ngram_index.h)
  DraftModel,  // a smaller model sharing the tokenizer proposes (engine/draft_step.h)
};

// The most proposals one row may verify in a step.
constexpr int kMaxSpeculativeTokens = 16;

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::Ngram;
  int num_speculative_tokens = 0;  // K, 1..kMaxSpeculativeTokens
  // n-gram: the longest and shortest suffix of the row looked up (vLLM: both 5 when unset).
  int prompt_lookup_max = 5;
  int prompt_lookup_min = 5;
  std::string model;     // draft_model: the draft's folder
  bool adaptive = true;  // K and on/off from acceptance and measured step costs
};

// Parses the JSON text of --speculative-config; throws tandem::Error naming the field and
// the value (an unknown key, a missing num_speculative_tokens, min > max, ...).
SpeculativeConfig parse_speculative_config(std::string_view json_text);

const char* spec_method_name(SpecMethod method);
// One line for the ready card: "ngram, K = 4, n-grams 2..4, adaptive".
std::string speculative_summary(const SpeculativeConfig& config);

}  // namespace tandem
