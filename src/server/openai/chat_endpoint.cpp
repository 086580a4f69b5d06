// POST /v1/chat/completions.
#include "server/common/api_error.h"
#include "server/common/ids.h"
#include "server/common/prompt_limits.h"
#include "server/common/request_fields.h"
#include "server/common/response_writer.h"
#include "server/common/sampling_fields.h"
#include "server/endpoints.h"
#include "server/openai/chat_request.h"
#include "server/openai/chat_response.h"

namespace tandem::server {

void handle_chat_completions(const EndpointContext& ctx, const httplib::Request& req,
                             httplib::Response& res) {
  const ModelInfo& info = ctx.model.engine->model_info();
  Json body = parse_request_body(req.body, ctx.limits.json);
  require_served_model(ctx, body);
  ChatCompletionRequest r =
      parse_chat_request(body, ctx.model.defaults, info.vocab_size, ctx.limits);
  attach_grammar(*ctx.model.grammars, r.constraint, r.forced_tools, r.prompt.tools,
                 ctx.model.tool_format, r.generation);
  r.generation.prompt = chat_prompt_tokens(ctx, r.prompt, "messages");
  check_request_tokens(int64_t(r.generation.prompt.size()) * r.n, ctx.limits, "n");
  // No max_tokens: the rest of the context, as vLLM does for chat.
  fit_to_context(r.generation, info, r.max_tokens, std::nullopt, {"messages", "max_tokens"});

  ChatFormat format{r.top_logprobs, r.parse_tool_calls, token_text_of(ctx.model),
                    int(r.generation.prompt.size())};
  ResponseMeta meta{random_id("chatcmpl-"), unix_time_now(), ctx.model_name};
  auto run = std::make_unique<GenerationRun>(*ctx.model.engine, expand_choices(r.generation, r.n),
                                             &ctx.metrics);
  if (r.stream) {
    auto encoder = std::make_unique<ChatStreamEncoder>(meta, format, r.n, r.include_usage);
    respond_streaming(res, std::move(run), ctx.watch, std::move(encoder), ctx.guard);
  } else {
    respond_when_done(res, *run, ctx.watch, [&](const std::vector<ChoiceResult>& results) {
      return format_chat_completion(meta, format, results);
    });
  }
}

}  // namespace tandem::server
