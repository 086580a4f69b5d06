// The one pipeline of the four generation routes: /v1/chat/completions, /v1/completions,
// /v1/responses (openai/) and /v1/messages (anthropic/). A route is its parser and its
// answer's format; the steps between are here:
//   1. the body, parsed within the JSON limits           serve_generation
//   2. its `model` checked against the served names      serve_generation
//   3. the API's fields parsed and validated             the route's builder (its parser)
//   4. the output constraint compiled to a grammar  ┐
//   5. the chat template rendered                   │    prepare_chat_generation (completions
//   6. the prompt tokenized                         │    does these for each of its text or
//   7. max_tokens fitted to the context             ┘    token-id prompts)
//   8. the engine requests submitted                     serve_generation
//   9. the answer streamed (SSE) or collected whole,     serve_generation, with the route's
//      then formatted; engine errors become API errors   encoder or formatter
// Every failure is an ApiError thrown from its step; HttpServer's route wrapper answers it
// in the route's API shape.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "server/common/endpoint_context.h"
#include "server/common/generation_fields.h"
#include "server/common/generation_run.h"
#include "server/common/prompt_limits.h"
#include "server/common/stream_encoder.h"
#include "server/http/httplib_types.h"

namespace tandem::server {

// What a route's builder returns: the engine requests and how to answer them.
struct GenerationPlan {
  const char* id_prefix = "";               // the response id's: "chatcmpl-", "msg_", ...
  std::vector<GenerationRequest> requests;  // choice i is requests[i], ready to submit
  // Exactly one is set: `encoder` streams the answer (SSE), `format` answers it whole. Both
  // get the response's id, creation time and model name.
  std::function<std::unique_ptr<StreamEncoder>(const ResponseMeta&)> encoder;
  std::function<Json(const ResponseMeta&, const std::vector<ChoiceResult>&)> format;
};

// Steps 3 to 7 of one route: its request body in, its plan out.
using GenerationBuilder = std::function<GenerationPlan(const Json& body)>;

// Sets the plan's answer from the route's `format`: streamed, by an
// `Encoder(meta, format, encoder_args...)`; whole, by `whole(meta, format, results)`, or
// `whole(meta, format, results.front())` for an API of one choice.
template <class Encoder, class Format, class Whole, class... EncoderArgs>
void answer_with(GenerationPlan& plan, bool stream, Format format, Whole whole,
                 EncoderArgs... encoder_args) {
  if (stream) {
    plan.encoder = [format = std::move(format), encoder_args...](const ResponseMeta& meta) {
      return std::unique_ptr<StreamEncoder>(
          std::make_unique<Encoder>(meta, format, encoder_args...));
    };
    return;
  }
  plan.format = [format = std::move(format), whole](const ResponseMeta& meta,
                                                    const std::vector<ChoiceResult>& results) {
    if constexpr (std::is_invocable_v<Whole, const ResponseMeta&, const Format&,
                                      const ChoiceResult&>)
      return whole(meta, format, results.front());
    else
      return whole(meta, format, results);
  };
}

// Serves one generation request: steps 1, 2, 8 and 9 around the route's `build`.
void serve_generation(const EndpointContext& ctx, const httplib::Request& req,
                      httplib::Response& res, const GenerationBuilder& build);

// Steps 4 to 7 for a conversation: the constraint or forced tool call compiled into
// request.generation.grammar, the conversation rendered and tokenized into its prompt (a
// text that cannot fit is refused before it is tokenized), the row's thinking set up from
// where the prompt leaves it (request.reasoning, request.generation.thinking: the grammar
// starts after the thinking; reasoning_setup.h), and max_tokens fitted to the context (not
// given: the rest of it, as vLLM does for chat). `names` are the prompt's and
// max tokens' fields, named in errors. `num_choices` > 0 (chat's n): the prompt's tokens ×
// n must be within --max-request-tokens (a 400 naming "n"); the APIs without n pass 0.
void prepare_chat_generation(const EndpointContext& ctx, ChatGeneration& request,
                             const PromptFieldNames& names, int num_choices = 0);

}  // namespace tandem::server
