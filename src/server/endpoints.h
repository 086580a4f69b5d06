// The route handlers. Each reads and validates its body, builds the prompt, submits the
// engine requests and hands the run to the response writer. They throw ApiError for
// anything the client got wrong; HttpServer's route wrapper turns that into the API's
// error shape.
#pragma once

#include <memory>
#include <string>

#include "server/connection_server.h"
#include "server/generation_run.h"
#include "server/logprobs_format.h"
#include "server/served_model.h"
#include "server/server_metrics.h"

namespace tandem::server {

struct EndpointContext {
  const ServedModel& model;
  ServerMetrics& metrics;
  ClientWatch watch;
  std::string model_name;       // the served name, repeated in every response
  std::shared_ptr<void> guard;  // in-flight token, kept by streams until they end
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

// Shared by the handlers.
TokenText token_text_of(const ServedModel& model);
const ChatPromptBuilder& chat_builder(const ServedModel& model);  // 400 if the model has none
void reply_json(httplib::Response& res, const Json& body, int status = 200);

}  // namespace tandem::server
