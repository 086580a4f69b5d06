// The route handlers. Each reads and validates its body, builds the prompt, submits the
// engine requests and hands the run to the response writer. They throw ApiError for
// anything the client got wrong; HttpServer's route wrapper turns that into the API's
// error shape.
#pragma once

#include <memory>
#include <string>

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

void handle_chat_completions(const EndpointContext& ctx, const httplib::Request& req,
                             httplib::Response& res);
void handle_completions(const EndpointContext& ctx, const httplib::Request& req,
                        httplib::Response& res);
void handle_messages(const EndpointContext& ctx, const httplib::Request& req,
                     httplib::Response& res);
void handle_count_tokens(const EndpointContext& ctx, const httplib::Request& req,
                         httplib::Response& res);
void handle_responses(const EndpointContext& ctx, const httplib::Request& req,
                      httplib::Response& res);
void handle_models(const EndpointContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(const EndpointContext& ctx, const httplib::Request& req,
                     httplib::Response& res);
void handle_detokenize(const EndpointContext& ctx, const httplib::Request& req,
                       httplib::Response& res);
// --enable-lora-runtime-updates (lora_endpoints.cpp).
void handle_load_lora_adapter(const EndpointContext& ctx, const httplib::Request& req,
                              httplib::Response& res);
void handle_unload_lora_adapter(const EndpointContext& ctx, const httplib::Request& req,
                                httplib::Response& res);

// Shared by the handlers.
TokenText token_text_of(const ServedModel& model);
const ChatPromptBuilder& chat_builder(const ServedModel& model);  // 400 if the model has none
// A generation's chat prompt: rendered under the request's limits, refused before it is
// tokenized if its length alone shows it cannot fit the context, then tokenized.
std::vector<int32_t> chat_prompt_tokens(const EndpointContext& ctx, const ChatPromptInput& prompt,
                                        const char* field);
// The template bounds of this request (the server's limits and its stop flag).
jinja::RenderLimits request_render_limits(const EndpointContext& ctx);
// 404 model_not_found unless the body's `model` (when given) is one the server serves.
void require_served_model(const EndpointContext& ctx, const Json& body);
void reply_json(httplib::Response& res, const Json& body, int status = 200);

}  // namespace tandem::server
