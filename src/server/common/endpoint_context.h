// What every route handler is given (EndpointContext), and the steps of a handler that
// every API shares: reading the body and checking the `model` it names, the chat
// template's prompt under the request's limits, replying with JSON. Handlers throw ApiError for
// anything the client got wrong; HttpServer's route wrapper turns that into the API's
// error shape.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/common/api_error.h"
#include "server/common/generation_run.h"
#include "server/common/logprobs_format.h"
#include "server/common/served_model.h"
#include "server/common/server_limits.h"
#include "server/common/server_metrics.h"
#include "server/http/httplib_types.h"

namespace tandem::server {

struct EndpointContext {
  const ServedModel& model;
  ServerMetrics& metrics;
  ClientWatch watch;
  std::string model_name;       // the served name, repeated in every response
  std::shared_ptr<void> guard;  // in-flight token, kept by streams until they end
  const RequestLimits& limits;
  const std::atomic<bool>* cancel = nullptr;  // raised when the server stops: ends renders
};

// The request's body, parsed within the JSON limits (a 400 otherwise), whose `model` (when
// given) is one the server serves (a 404 model_not_found otherwise).
Json read_request_body(const EndpointContext& ctx, const httplib::Request& req);
// 404 model_not_found unless the body's `model` (when given) is one the server serves.
void require_served_model(const EndpointContext& ctx, const Json& body);

TokenText token_text_of(const ServedModel& model);
const ChatPromptBuilder& chat_builder(const ServedModel& model);  // 400 if the model has none
// A generation's chat prompt: its images read and preprocessed (request_images.h), rendered
// under the request's limits, each image marker the template wrote expanded, refused before
// it is tokenized if its length alone shows it cannot fit the context (unless
// `for_generation` is false: the token-counting routes count any prompt), then tokenized.
struct ChatPromptTokens {
  std::string text;  // as rendered (where a reasoning row starts is read off its end)
  std::vector<int32_t> ids;
  std::vector<MediaSpan> media;  // where its images' soft tokens are (empty without images)
};
ChatPromptTokens chat_prompt_tokens(const EndpointContext& ctx, const ChatPromptInput& prompt,
                                    const char* field, bool for_generation = true);
// The template bounds of this request (the server's limits and its stop flag).
jinja::RenderLimits request_render_limits(const EndpointContext& ctx);
void reply_json(httplib::Response& res, const Json& body, int status = 200);
ApiError model_not_found(const std::string& name);

}  // namespace tandem::server
