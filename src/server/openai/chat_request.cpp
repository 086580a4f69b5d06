#include "server/openai/chat_request.h"

#include "server/common/api_error.h"
#include "server/common/generation_fields.h"
#include "server/common/request_fields.h"
#include "server/common/sampling_fields.h"
#include "server/openai/chat_messages.h"
#include "server/openai/openai_fields.h"

namespace tandem::server {
namespace {

constexpr int64_t kMaxTopLogprobs = 20;

void read_tools(const FieldReader& f, ChatCompletionRequest& out) {
  Json tools = normalize_openai_tools(f.array_field("tools"));
  const Json* choice = f.has("tool_choice") ? &f.object()["tool_choice"] : nullptr;
  offer_tools(std::move(tools), tool_choice_allows_calls(choice), openai_tool_forcing(choice), out);
}

void read_logprobs(const FieldReader& f, ChatCompletionRequest& out) {
  bool logprobs = f.boolean("logprobs").value_or(false);
  auto top = f.integer("top_logprobs", 0, kMaxTopLogprobs);
  if (top && !logprobs)
    invalid_request("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
  out.top_logprobs = logprobs ? int(top.value_or(0)) : -1;
  out.generation.top_logprobs = out.top_logprobs;
}

void read_prompt_flags(const FieldReader& f, ChatCompletionRequest& out) {
  read_prompt_options(f, out.prompt);
  out.prompt.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  out.prompt.continue_final_message = f.boolean("continue_final_message").value_or(false);
  if (out.prompt.continue_final_message && !f.has("add_generation_prompt"))
    out.prompt.add_generation_prompt = false;
}

}  // namespace

ChatCompletionRequest parse_chat_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits) {
  FieldReader f(body);
  ChatCompletionRequest out;
  start_generation(f, defaults, out);
  out.prompt.messages =
      normalize_openai_messages(f.require("messages"), limits.json, {.images = &out.prompt.images});
  read_tools(f, out);
  read_prompt_flags(f, out);
  out.max_tokens = read_max_tokens(f, "max_completion_tokens");
  if (!out.max_tokens) out.max_tokens = read_max_tokens(f, "max_tokens");
  out.n = read_num_choices(f, limits.max_choices);
  StreamOptions stream = read_stream_options(f);
  out.stream = stream.stream;
  out.include_usage = stream.include_usage;
  out.constraint = read_output_constraint(f, limits.json);
  out.thinking_budget = f.integer("thinking_token_budget", 0, kMaxTokensLimit);
  out.budget_field = "thinking_token_budget";
  check_unsupported_fields(f, out.n);
  read_logprobs(f, out);
  out.return_token_ids = f.boolean("return_token_ids").value_or(false);
  read_sampling_fields(f, sampling_spec(limits), vocab_size, out.generation);
  return out;
}

}  // namespace tandem::server
