// What every generation request's body shares, read alike by each API's parser
// (openai/chat_request, openai/completion_request, openai/responses_request,
// anthropic/messages_request). Each parser reads in this order: start_generation() (the
// model's defaults and the adapter `model` names), its API's own fields, then
// read_sampling_fields() (sampling_fields.h), so that of several bad fields the first one
// named does not depend on the API.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "engine/request.h"
#include "server/common/answer_split.h"
#include "server/common/chat_prompt.h"
#include "server/common/json_text.h"
#include "server/common/request_fields.h"
#include "server/common/structured_output.h"

namespace tandem::server {

// A generation request besides its prompt, which the endpoint tokenizes before it fits
// max_tokens to the context (generation_endpoint.h).
struct GenerationFields {
  GenerationRequest generation;       // sampling, stops, logprobs, adapter; prompt empty
  std::optional<int64_t> max_tokens;  // as the API names it; nullopt: the endpoint chooses
  bool stream = false;
};

// A request whose prompt is a conversation for the chat template: chat completions, the
// Responses API and Anthropic messages.
struct ChatGeneration : GenerationFields {
  ChatPromptInput prompt;
  OutputConstraint constraint;    // response_format, text.format, structured_outputs
  bool parse_tool_calls = false;  // tools were given and tool_choice allows calls
  ToolForcing forced_tools;       // tool_choice forces a call (to any tool, or the one named)
  // Tokens a row may think before the engine ends its thinking block (chat's
  // thinking_token_budget, Anthropic's thinking.budget_tokens); nullopt: unbounded.
  std::optional<int64_t> thinking_budget;
  // The field the budget came from, named in the 400 when the model has no reasoning
  // parser; empty: a budget the model cannot use is ignored (Anthropic's `thinking`).
  std::string budget_field;
  // Set by prepare_chat_generation: how the output splits into reasoning and content.
  ReasoningSplit reasoning;
};

// The most tokens any API lets a request ask for.
inline constexpr int64_t kMaxTokensLimit = std::numeric_limits<int32_t>::max();

// The model's defaults, with the body's `model` as the adapter to run (an adapter's name or
// the served model's: select_model() decides).
void start_generation(const FieldReader& fields, const GenerationRequest& defaults,
                      GenerationFields& out);

// A max-tokens field (max_tokens, max_completion_tokens, max_output_tokens): an integer in
// [min, kMaxTokensLimit], or nullopt when absent.
std::optional<int64_t> read_max_tokens(const FieldReader& fields, std::string_view key,
                                       int64_t min = 1);

// Template variables from chat_template_kwargs (and a top-level enable_thinking).
Json read_template_kwargs(const FieldReader& fields);

// The prompt options every chat API takes: the template variables above, and
// split_special_tokens (special-token text in the client's messages stays text unless false;
// chat_prompt.h).
void read_prompt_options(const FieldReader& fields, ChatPromptInput& out);

// The request's tools (OpenAI's chat shape, or null), offered to the model unless
// tool_choice said "none" (`allowed` false): then the template sees none and no output is
// parsed as a call. `forcing` is what tool_choice forces.
void offer_tools(Json tools, bool allowed, const ToolForcing& forcing, ChatGeneration& out);

}  // namespace tandem::server
