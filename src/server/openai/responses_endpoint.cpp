// POST /v1/responses (the OpenAI Responses API).
#include "server/common/api_error.h"
#include "server/common/ids.h"
#include "server/common/prompt_limits.h"
#include "server/common/request_fields.h"
#include "server/common/response_writer.h"
#include "server/endpoints.h"
#include "server/openai/responses_request.h"
#include "server/openai/responses_response.h"

namespace tandem::server {

void handle_responses(const EndpointContext& ctx, const httplib::Request& req,
                      httplib::Response& res) {
  const ModelInfo& info = ctx.model.engine->model_info();
  Json body = parse_request_body(req.body, ctx.limits.json);
  require_served_model(ctx, body);
  ResponsesRequest r =
      parse_responses_request(body, ctx.model.defaults, info.vocab_size, ctx.limits);
  attach_grammar(*ctx.model.grammars, r.constraint, r.forced_tools, r.prompt.tools,
                 ctx.model.tool_format, r.generation);
  r.generation.prompt = chat_prompt_tokens(ctx, r.prompt, "input");
  fit_to_context(r.generation, info, r.max_output_tokens, std::nullopt,
                 {"input", "max_output_tokens"});

  ResponsesFormat format{int(r.generation.prompt.size()), r.echo, random_id("msg_"),
                         r.parse_tool_calls};
  ResponseMeta meta{random_id("resp_"), unix_time_now(), ctx.model_name};
  std::vector<GenerationRequest> requests{std::move(r.generation)};
  auto run = std::make_unique<GenerationRun>(*ctx.model.engine, std::move(requests), &ctx.metrics);
  if (r.stream) {
    auto encoder = std::make_unique<ResponsesStreamEncoder>(meta, format);
    respond_streaming(res, std::move(run), ctx.watch, std::move(encoder), ctx.guard);
  } else {
    respond_when_done(res, *run, ctx.watch, [&](const std::vector<ChoiceResult>& results) {
      return format_response(meta, format, results.front());
    });
  }
}

}  // namespace tandem::server
