// POST /v1/messages (Anthropic): messages_request's parser and anthropic_response's format
// in the generation pipeline (common/generation_endpoint.h); and /v1/messages/count_tokens.
#include "server/anthropic/anthropic_response.h"
#include "server/anthropic/messages_request.h"
#include "server/common/generation_endpoint.h"
#include "server/common/request_fields.h"
#include "server/endpoints.h"

namespace tandem::server {

void handle_messages(const EndpointContext& ctx, const httplib::Request& req,
                     httplib::Response& res) {
  serve_generation(ctx, req, res, [&](const Json& body) {
    MessagesRequest r = parse_messages_request(
        body, ctx.model.defaults, ctx.model.engine->model_info().vocab_size, ctx.limits);
    prepare_chat_generation(ctx, r, {"messages", "max_tokens"});
    AnthropicFormat format{int(r.generation.prompt.size()), r.parse_tool_calls, r.reasoning};
    GenerationPlan plan{"msg_", {std::move(r.generation)}};
    answer_with<AnthropicStreamEncoder>(plan, r.stream, format, format_anthropic_message);
    return plan;
  });
}

void handle_count_tokens(const EndpointContext& ctx, const httplib::Request& req,
                         httplib::Response& res) {
  Json body = read_request_body(ctx, req);
  ChatGeneration conversation;
  read_anthropic_conversation(FieldReader(body), conversation);
  ChatPromptTokens prompt = chat_prompt_tokens(ctx, conversation.prompt, "messages", false);
  reply_json(res, {{"input_tokens", prompt.ids.size()}});
}

}  // namespace tandem::server
