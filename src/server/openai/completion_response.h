// OpenAI completion responses ("text_completion"), whole and streamed: the echoed
// prompt, logprobs in the completions shape, vLLM's token_ids / prompt_token_ids, and
// usage counting each prompt once.
#pragma once

#include <vector>

#include "server/common/generation_run.h"
#include "server/common/logprobs_format.h"
#include "server/common/stream_encoder.h"

namespace tandem::server {

struct CompletionFormat {
  int logprobs = -1;
  bool echo_logprobs = false;  // echo + logprobs: the prompt's tokens lead the logprobs
  bool return_token_ids = false;
  TokenText token_text;
  int prompt_tokens = 0;                         // summed over the prompts
  std::vector<std::string> echo;                 // [num_choices] prompt text, or "" if no echo
  std::vector<std::vector<int32_t>> prompt_ids;  // [num_choices] the choice's prompt
  int choices_per_prompt = 1;                    // n: choices [k·n, (k+1)·n) share prompt k
};

Json format_completion(const ResponseMeta& meta, const CompletionFormat& format,
                       const std::vector<ChoiceResult>& results);

class CompletionStreamEncoder : public StreamEncoder {
 public:
  CompletionStreamEncoder(ResponseMeta meta, CompletionFormat format, bool include_usage);
  std::string begin() override;
  std::string chunk(int choice, const StreamChunk& chunk) override;
  std::string end() override;
  std::string error(const std::string& message) override;

 private:
  Json chunk_json(Json choice) const;

  ResponseMeta meta_;
  CompletionFormat format_;
  bool include_usage_;
  std::vector<size_t> offsets_;  // [num_choices] text_offset of the next token
  std::vector<int> num_tokens_;  // [num_choices]
  std::vector<int> cached_tokens_;  // [num_choices]
  int completion_tokens_ = 0;
};

}  // namespace tandem::server
