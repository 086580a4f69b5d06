#include "server/openai/completion_request.h"

#include "server/common/api_error.h"
#include "server/common/generation_fields.h"
#include "server/common/request_fields.h"
#include "server/common/sampling_fields.h"
#include "server/openai/openai_fields.h"
#include "server/openai/prompt_inputs.h"

namespace tandem::server {
namespace {

constexpr int64_t kMaxLogprobs = 20;

}  // namespace

CompletionRequest parse_completion_request(const Json& body, const GenerationRequest& defaults,
                                           int vocab_size, const RequestLimits& limits) {
  FieldReader f(body);
  CompletionRequest out;
  start_generation(f, defaults, out);
  out.prompts = read_prompt_inputs(f.require("prompt"), "prompt", vocab_size);
  out.max_tokens = read_max_tokens(f, "max_tokens", /*min=*/0);
  out.n = read_num_choices(f, limits.max_choices);
  if (out.prompts.size() * size_t(out.n) > limits.max_sequences)
    invalid_request("n",
                    "{} prompts × n = {} choices is more than the limit of {} "
                    "(--max-request-sequences)",
                    out.prompts.size(), out.prompts.size() * size_t(out.n), limits.max_sequences);
  StreamOptions stream = read_stream_options(f);
  out.stream = stream.stream;
  out.include_usage = stream.include_usage;
  out.echo = f.boolean("echo").value_or(false);
  out.logprobs = int(f.integer("logprobs", 0, kMaxLogprobs).value_or(-1));
  if (out.max_tokens == 0 && !out.echo)
    invalid_request("max_tokens",
                    "'max_tokens' 0 generates nothing: it is for 'echo' (with 'logprobs', "
                    "the prompt's own log-probabilities)");
  // echo + logprobs: every prompt token's log-probability given the tokens before it (the
  // first has none), as OpenAI's legacy completions and vLLM return them.
  if (out.echo && out.logprobs >= 0) {
    if (out.stream)
      invalid_request("stream",
                      "'echo' with 'logprobs' is not supported with 'stream': ask without "
                      "streaming");
    out.generation.prompt_logprobs = PromptLogprobs{.first = 1, .top = out.logprobs};
  }
  out.generation.top_logprobs = out.logprobs;
  out.return_token_ids = f.boolean("return_token_ids").value_or(false);
  out.add_special_tokens = f.boolean("add_special_tokens").value_or(true);
  out.constraint = read_output_constraint(f, limits.json);
  check_unsupported_fields(f, out.n);
  read_sampling_fields(f, sampling_spec(limits), vocab_size, out.generation);
  return out;
}

}  // namespace tandem::server
