// POST /v1/responses (the OpenAI Responses API): responses_request's parser and
// responses_response's format in the generation pipeline (common/generation_endpoint.h).
#include "server/common/generation_endpoint.h"
#include "server/common/ids.h"
#include "server/endpoints.h"
#include "server/openai/responses_request.h"
#include "server/openai/responses_response.h"

namespace tandem::server {

void handle_responses(const EndpointContext& ctx, const httplib::Request& req,
                      httplib::Response& res) {
  serve_generation(ctx, req, res, [&](const Json& body) {
    ResponsesRequest r = parse_responses_request(
        body, ctx.model.defaults, ctx.model.engine->model_info().vocab_size, ctx.limits);
    prepare_chat_generation(ctx, r, {"input", "max_output_tokens"});
    ResponsesFormat format{int(r.generation.prompt.size()),
                           std::move(r.echo),
                           random_id("msg_"),
                           r.parse_tool_calls,
                           r.reasoning,
                           random_id("rs_")};
    GenerationPlan plan{"resp_", {std::move(r.generation)}};
    answer_with<ResponsesStreamEncoder>(plan, r.stream, std::move(format), format_response);
    return plan;
  });
}

}  // namespace tandem::server
