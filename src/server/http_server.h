// The HTTP server: OpenAI- and Anthropic-compatible routes over an engine.
//
// Lifecycle (what `tandem serve` does):
//   HttpServer server(options);
//   server.start();                       // listening; /health is 503, /v1/* is 503
//   ... load the model, start the engine ...
//   server.set_ready(load_served_model(dir, engine));   // /health 200, /v1/* served
//   server.wait();                        // until stop(), or request_stop() from a signal
//   engine.stop();
//
// Routes: POST /v1/chat/completions, /v1/completions, /v1/messages,
// /v1/messages/count_tokens, /v1/responses, /v1/embeddings, /tokenize, /detokenize (a
// route options.task does not serve answers 404); GET /v1/models,
// /v1/models/{id}, /health, /stats, /metrics. Unknown routes are 404 JSON. /v1/* (and
// /tokenize, /detokenize) need the API key when one is set, as "Authorization: Bearer KEY"
// (the scheme in any case) or "x-api-key: KEY"; /health, /stats and /metrics are open, for
// probes and scrapers, and are answered at once even when every worker is busy. The web
// pages (GET /, /dashboard and their /web/* files; server/web/web_pages.h) are open too:
// their scripts send the key. options.web_ui off: they are not routed (404).
//
// Before a request's body is read: its Host must be allowed (host_policy.h; /health is
// exempt), the API key must match, and without an API key a POST must say it carries JSON
// (a cross-site form or text/plain POST is a "simple" request a browser sends to any
// address without asking). No handler lets an exception escape: every failure is a JSON
// error in the route's API shape (Anthropic's for /v1/messages*, OpenAI's elsewhere).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/common/api_error.h"
#include "server/common/serve_task.h"
#include "server/common/served_model.h"
#include "server/common/server_limits.h"
#include "server/common/server_metrics.h"
#include "server/host_policy.h"
#include "server/http/transport.h"

namespace tandem::server {

struct EndpointContext;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (HttpServer::port() tells which)
  std::optional<std::string> api_key;
  std::string served_model_name;  // "": the engine's model_info().name
  // --allowed-hosts: Host names answered (host_policy.h); nullopt: the default rule.
  std::optional<std::vector<std::string>> allowed_hosts;
  ServerLimits limits;
  std::chrono::seconds drain_timeout{30};  // stop(): how long in-flight requests may finish
  bool log_requests = false;               // one line per request on stderr
  bool web_ui = true;                      // the pages for people: / and /dashboard
  // --enable-lora-runtime-updates: POST /v1/load_lora_adapter and /v1/unload_lora_adapter
  // (lora_endpoints.cpp). Off, those paths do not exist (404), as in vLLM.
  bool lora_runtime_updates = false;
  // --task: the generation routes, /v1/embeddings, or both (common/serve_task.h).
  ServeTask task = ServeTask::Auto;
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and serves on background threads. Throws tandem::Error if it cannot bind.
  void start();
  // The bound port (after start()).
  int port() const { return port_; }

  // The model is loaded and the engine runs: serve it. Call once.
  void set_ready(ServedModel model);
  bool ready() const { return ready_.load(); }

  // Graceful stop: new generation requests get 503, chat-template renders in progress are
  // cancelled, in-flight generations may finish within drain_timeout (after which they
  // are cancelled: streams end with an error event), then the listener closes and the
  // serving threads are joined. Idempotent; call from any thread except a request handler.
  void stop();
  // Async-signal-safe: asks wait() to stop the server. For SIGINT/SIGTERM handlers.
  void request_stop() noexcept { stop_requested_.store(true); }
  bool stop_requested() const noexcept { return stop_requested_.load(); }
  // Blocks until the server has stopped (by stop(), or request_stop() + this call).
  void wait();

  const ServerMetrics& metrics() const { return metrics_; }
  size_t num_in_flight() const;
  // HTTP worker threads made so far (the pool grows on demand to --http-threads).
  int http_workers() const { return http_.num_workers(); }

 private:
  class InFlight;
  using Handler = void (*)(const EndpointContext&, const httplib::Request&, httplib::Response&);

  void install_routes();
  void install_web_routes();
  void route(const char* method, const char* pattern, ApiStyle style, Handler handler);
  void probe(const char* pattern, void (HttpServer::*handler)(httplib::Response&) const);
  void serve(ApiStyle style, Handler handler, const httplib::Request& req, httplib::Response& res);
  // The checks made before a request's body is read (see the header comment).
  bool admit(const httplib::Request& head, httplib::Response& res) const;
  void check_api_key(const httplib::Request& req) const;
  std::shared_ptr<const ServedModel> model() const;
  std::string model_name() const;

  void handle_health(httplib::Response& res) const;
  void handle_stats(httplib::Response& res) const;
  void handle_metrics(httplib::Response& res) const;

  ServerOptions options_;
  HostPolicy hosts_;
  http::HttpTransport http_;
  ServerMetrics metrics_;
  int port_ = 0;

  mutable std::mutex model_mu_;
  std::shared_ptr<const ServedModel> model_;
  std::atomic<bool> ready_{false};

  std::atomic<bool> draining_{false};        // refuse new generation requests, cancel renders
  std::atomic<bool> aborting_{false};        // cancel in-flight ones
  std::atomic<bool> stop_requested_{false};  // set by request_stop()
  std::once_flag stop_once_;
  std::atomic<bool> stopped_{false};

  mutable std::mutex flight_mu_;
  std::condition_variable flight_cv_;
  size_t in_flight_ = 0;
};

}  // namespace tandem::server
