// The route handlers HttpServer installs (http_server.cpp), one per route: OpenAI's in
// openai/, Anthropic's in anthropic/. Each takes the request's EndpointContext
// (common/endpoint_context.h) and throws ApiError for anything the client got wrong.
#pragma once

#include "server/common/endpoint_context.h"
#include "server/http/httplib_types.h"

namespace tandem::server {

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
// POST /v1/embeddings (openai/embeddings_endpoint.cpp).
void handle_embeddings(const EndpointContext& ctx, const httplib::Request& req,
                       httplib::Response& res);
// The routes a --task does not serve: a 404 naming the task (common/serve_task.cpp).
void handle_generation_not_served(const EndpointContext& ctx, const httplib::Request& req,
                                  httplib::Response& res);
void handle_embeddings_not_served(const EndpointContext& ctx, const httplib::Request& req,
                                  httplib::Response& res);
// --enable-lora-runtime-updates (openai/lora_endpoints.cpp).
void handle_load_lora_adapter(const EndpointContext& ctx, const httplib::Request& req,
                              httplib::Response& res);
void handle_unload_lora_adapter(const EndpointContext& ctx, const httplib::Request& req,
                                httplib::Response& res);

}  // namespace tandem::server
