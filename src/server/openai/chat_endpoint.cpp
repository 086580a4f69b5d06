// POST /v1/chat/completions: chat_request's parser and chat_response's format in the
// generation pipeline (common/generation_endpoint.h).
#include "server/common/generation_endpoint.h"
#include "server/common/sampling_fields.h"
#include "server/endpoints.h"
#include "server/openai/chat_request.h"
#include "server/openai/chat_response.h"

namespace tandem::server {

void handle_chat_completions(const EndpointContext& ctx, const httplib::Request& req,
                             httplib::Response& res) {
  serve_generation(ctx, req, res, [&](const Json& body) {
    ChatCompletionRequest r = parse_chat_request(
        body, ctx.model.defaults, ctx.model.engine->model_info().vocab_size, ctx.limits);
    prepare_chat_generation(ctx, r, {"messages", "max_tokens"}, r.n);
    ChatFormat format{r.top_logprobs,
                      r.parse_tool_calls,
                      token_text_of(ctx.model),
                      int(r.generation.prompt.size()),
                      r.reasoning,
                      r.return_token_ids,
                      r.return_token_ids ? r.generation.prompt : std::vector<int32_t>()};
    GenerationPlan plan{"chatcmpl-", expand_choices(r.generation, r.n)};
    answer_with<ChatStreamEncoder>(plan, r.stream, std::move(format), format_chat_completion, r.n,
                                   r.include_usage);
    return plan;
  });
}

}  // namespace tandem::server
