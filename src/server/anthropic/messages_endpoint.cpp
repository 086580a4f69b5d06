// POST /v1/messages and /v1/messages/count_tokens (Anthropic).
#include "server/anthropic/anthropic_response.h"
#include "server/anthropic/messages_request.h"
#include "server/common/api_error.h"
#include "server/common/ids.h"
#include "server/common/prompt_limits.h"
#include "server/common/request_fields.h"
#include "server/common/response_writer.h"
#include "server/endpoints.h"

namespace tandem::server {

void handle_messages(const EndpointContext& ctx, const httplib::Request& req,
                     httplib::Response& res) {
  const ModelInfo& info = ctx.model.engine->model_info();
  Json body = parse_request_body(req.body, ctx.limits.json);
  require_served_model(ctx, body);
  MessagesRequest r = parse_messages_request(body, ctx.model.defaults, info.vocab_size, ctx.limits);
  attach_grammar(*ctx.model.grammars, {}, r.forced_tools, r.prompt.tools, ctx.model.tool_format,
                 r.generation);
  r.generation.prompt = chat_prompt_tokens(ctx, r.prompt, "messages");
  fit_to_context(r.generation, info, r.max_tokens, std::nullopt, {"messages", "max_tokens"});

  AnthropicFormat format{int(r.generation.prompt.size()), r.parse_tool_calls};
  ResponseMeta meta{random_id("msg_"), unix_time_now(), ctx.model_name};
  std::vector<GenerationRequest> requests{std::move(r.generation)};
  auto run = std::make_unique<GenerationRun>(*ctx.model.engine, std::move(requests), &ctx.metrics);
  if (r.stream) {
    auto encoder = std::make_unique<AnthropicStreamEncoder>(meta, format);
    respond_streaming(res, std::move(run), ctx.watch, std::move(encoder), ctx.guard);
  } else {
    respond_when_done(res, *run, ctx.watch, [&](const std::vector<ChoiceResult>& results) {
      return format_anthropic_message(meta, format, results.front());
    });
  }
}

void handle_count_tokens(const EndpointContext& ctx, const httplib::Request& req,
                         httplib::Response& res) {
  Json body = parse_request_body(req.body, ctx.limits.json);
  require_served_model(ctx, body);
  FieldReader f(body);
  bool parse_tool_calls = false;
  ChatPromptInput prompt = read_anthropic_prompt(f, parse_tool_calls);
  reply_json(res, {{"input_tokens",
                    chat_builder(ctx.model).tokens(prompt, request_render_limits(ctx)).size()}});
}

}  // namespace tandem::server
