#include "server/http_server.h"

#include <fmt/format.h>

#include <cctype>

#include "server/endpoints.h"
#include "server/web/web_pages.h"

namespace tandem::server {
namespace {

ApiStyle style_for_path(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiStyle::Anthropic : ApiStyle::OpenAI;
}

void reply_error(httplib::Response& res, ApiStyle style, const ApiError& e) {
  res.status = e.status();
  res.set_content(dump_json(error_body(style, e)), "application/json");
}

// Compares without an early exit, so response timing does not reveal the key.
bool same_secret(const std::string& given, const std::string& key) {
  if (key.empty() || given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= uint8_t(given[i] ^ key[i]);
  return diff == 0;
}

// "Bearer KEY" with the scheme in any case (RFC 9110 §11.1: schemes are case-insensitive).
std::optional<std::string> bearer_token(const std::string& auth) {
  constexpr std::string_view kScheme = "bearer";
  if (auth.size() <= kScheme.size() || auth[kScheme.size()] != ' ') return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(auth[i])) != kScheme[i]) return std::nullopt;
  size_t start = auth.find_first_not_of(' ', kScheme.size());
  return start == std::string::npos ? std::string() : auth.substr(start);
}

bool needs_api_key(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

// application/json, or any application/*+json, with or without parameters.
bool is_json_media_type(const std::string& content_type) {
  std::string type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && std::isspace(static_cast<unsigned char>(type.back()))) type.pop_back();
  for (char& c : type) c = char(std::tolower(static_cast<unsigned char>(c)));
  return type == "application/json" || (type.rfind("application/", 0) == 0 && type.size() > 17 &&
                                        type.compare(type.size() - 5, 5, "+json") == 0);
}

// The error the transport decided, as an ApiError of the matching type and code.
ApiError transport_error(int status, const std::string& message) {
  switch (status) {
    case 404:
      return not_found_error(message);
    case 408:
      return ApiError(408, "invalid_request_error", message, "", "request_timeout");
    case 413:
      return ApiError(413, "invalid_request_error", message, "", "request_too_large");
    case 415:
      return ApiError(415, "invalid_request_error", message, "", "unsupported_media_type");
    case 431:
      return ApiError(431, "invalid_request_error", message, "", "headers_too_large");
    case 503:
      return ApiError(503, "server_error", message, "", "too_many_connections");
    default:
      return status < 500 ? ApiError(status, "invalid_request_error", message)
                          : ApiError(status, "server_error", message);
  }
}

}  // namespace

// Counts a request as in flight for as long as something holds it (a streaming response
// holds it until its last byte). Admission and stop() decide under one lock: a request is
// either counted before the drain began, and then served to its end, or refused uncounted
// (checking draining_ after counting let stop() start between the two, and a request the
// drain was waiting for came back 503).
class HttpServer::InFlight {
 public:
  explicit InFlight(HttpServer& server) : server_(server) {
    std::lock_guard<std::mutex> lock(server_.flight_mu_);
    admitted_ = !server_.draining_;
    if (admitted_) ++server_.in_flight_;
  }
  ~InFlight() {
    if (!admitted_) return;
    std::lock_guard<std::mutex> lock(server_.flight_mu_);
    --server_.in_flight_;
    server_.flight_cv_.notify_all();
  }
  bool admitted() const { return admitted_; }

 private:
  HttpServer& server_;
  bool admitted_ = false;
};

namespace {

http::TransportHooks hooks_for(
    bool log_requests, std::function<bool(const httplib::Request&, httplib::Response&)> admit) {
  http::TransportHooks hooks;
  hooks.admit = std::move(admit);
  hooks.error = [](const httplib::Request* head, int status, const std::string& message,
                   httplib::Response& res) {
    reply_error(res, style_for_path(head ? head->path : std::string()),
                transport_error(status, message));
  };
  if (log_requests)
    hooks.log = [](const httplib::Request& req, const httplib::Response& res) {
      fmt::print(stderr, "{} {} {}\n", req.method, req.path, res.status);
    };
  return hooks;
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : options_(std::move(options)),
      hosts_(
          HostPolicy::create(options_.host, options_.allowed_hosts, options_.api_key.has_value())),
      http_(options_.limits.http,
            hooks_for(options_.log_requests,
                      [this](const httplib::Request& head, httplib::Response& res) {
                        return admit(head, res);
                      })) {
  install_routes();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::install_routes() {
  // What --task leaves out answers 404 naming the task (common/serve_task.h).
  auto generation = [&](Handler h) {
    return serves_generation(options_.task) ? h : handle_generation_not_served;
  };
  route("POST", "/v1/chat/completions", ApiStyle::OpenAI, generation(handle_chat_completions));
  route("POST", "/v1/completions", ApiStyle::OpenAI, generation(handle_completions));
  route("POST", "/v1/messages", ApiStyle::Anthropic, generation(handle_messages));
  route("POST", "/v1/messages/count_tokens", ApiStyle::Anthropic, handle_count_tokens);
  route("POST", "/v1/responses", ApiStyle::OpenAI, generation(handle_responses));
  route("POST", "/v1/embeddings", ApiStyle::OpenAI,
        serves_embeddings(options_.task) ? handle_embeddings : handle_embeddings_not_served);
  route("GET", "/v1/models", ApiStyle::OpenAI, handle_models);
  route("GET", "/v1/models/(.+)", ApiStyle::OpenAI, handle_models);
  route("POST", "/tokenize", ApiStyle::OpenAI, handle_tokenize);
  route("POST", "/detokenize", ApiStyle::OpenAI, handle_detokenize);
  if (options_.lora_runtime_updates) {
    route("POST", "/v1/load_lora_adapter", ApiStyle::OpenAI, handle_load_lora_adapter);
    route("POST", "/v1/unload_lora_adapter", ApiStyle::OpenAI, handle_unload_lora_adapter);
  }
  probe("/health", &HttpServer::handle_health);
  probe("/stats", &HttpServer::handle_stats);
  probe("/metrics", &HttpServer::handle_metrics);
  install_web_routes();
}

// The pages are static and open (like /health): their scripts send the key themselves.
void HttpServer::install_web_routes() {
  if (options_.web_ui) install_web_pages(http_);
}

void HttpServer::route(const char* method, const char* pattern, ApiStyle style, Handler handler) {
  http_.route(method, pattern,
              [this, style, handler](const httplib::Request& req, httplib::Response& res) {
                serve(style, handler, req, res);
              });
}

void HttpServer::probe(const char* pattern, void (HttpServer::*handler)(httplib::Response&) const) {
  http_.route(
      "GET", pattern,
      [this, handler](const httplib::Request&, httplib::Response& res) { (this->*handler)(res); },
      http::Lane::Probe);
}

bool HttpServer::admit(const httplib::Request& head, httplib::Response& res) const {
  ApiStyle style = style_for_path(head.path);
  try {
    if (head.path != "/health" && !hosts_.allows(head.get_header_value("Host")))
      throw ApiError(403, "invalid_request_error",
                     fmt::format("Host '{}' is not allowed: this server answers {} (add names "
                                 "with --allowed-hosts)",
                                 head.get_header_value("Host"), hosts_.describe()),
                     "", "host_not_allowed");
    if (!needs_api_key(head.path)) return true;
    check_api_key(head);
    if (head.method == "POST" && !options_.api_key &&
        !is_json_media_type(head.get_header_value("Content-Type")))
      throw ApiError(415, "invalid_request_error",
                     fmt::format("Content-Type must be application/json, got '{}' (a server "
                                 "without --api-key accepts only JSON posts)",
                                 head.get_header_value("Content-Type")),
                     "", "unsupported_media_type");
    if (draining_) throw shutting_down_error();
    if (!model()) throw not_ready_error();
    return true;
  } catch (const ApiError& e) {
    reply_error(res, style, e);
    return false;
  }
}

void HttpServer::serve(ApiStyle style, Handler handler, const httplib::Request& req,
                       httplib::Response& res) {
  auto guard = std::make_shared<InFlight>(*this);
  try {
    if (!guard->admitted()) throw shutting_down_error();
    std::shared_ptr<const ServedModel> served = model();
    if (!served) throw not_ready_error();
    ClientWatch watch;
    watch.connected = http::client_connected;
    watch.aborting = [this] { return aborting_.load(); };
    EndpointContext ctx{*served,   metrics_, watch, model_name(), guard, options_.limits.request,
                        &draining_};
    handler(ctx, req, res);
  } catch (const ApiError& e) {
    reply_error(res, style, e);
  } catch (const std::exception& e) {
    reply_error(res, style, internal_error(e.what()));
  } catch (...) {
    reply_error(res, style, internal_error("Internal server error."));
  }
}

void HttpServer::check_api_key(const httplib::Request& req) const {
  if (!options_.api_key) return;
  const std::string& key = *options_.api_key;
  std::optional<std::string> token = bearer_token(req.get_header_value("Authorization"));
  if (token && same_secret(*token, key)) return;
  if (same_secret(req.get_header_value("x-api-key"), key)) return;
  throw unauthorized_error();
}

std::shared_ptr<const ServedModel> HttpServer::model() const {
  std::lock_guard<std::mutex> lock(model_mu_);
  return model_;
}

std::string HttpServer::model_name() const {
  if (!options_.served_model_name.empty()) return options_.served_model_name;
  auto served = model();
  return served ? served->engine->model_info().name : std::string();
}

void HttpServer::start() {
  port_ = http_.bind(options_.host, options_.port);
  http_.start();
}

void HttpServer::set_ready(ServedModel model) {
  TANDEM_CHECK(model.engine && model.tokenizer, "set_ready needs an engine and a tokenizer");
  {
    std::lock_guard<std::mutex> lock(model_mu_);
    model_ = std::make_shared<const ServedModel>(std::move(model));
  }
  ready_ = true;
}

size_t HttpServer::num_in_flight() const {
  std::lock_guard<std::mutex> lock(flight_mu_);
  return in_flight_;
}

void HttpServer::stop() {
  std::call_once(stop_once_, [this] {
    std::unique_lock<std::mutex> lock(flight_mu_);
    draining_ = true;  // under the lock: InFlight admits or refuses on one side of it
    flight_cv_.wait_for(lock, options_.drain_timeout, [this] { return in_flight_ == 0; });
    aborting_ = true;  // the rest are cancelled; they notice within one poll interval
    flight_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return in_flight_ == 0; });
    lock.unlock();
    http_.stop();
    stopped_ = true;
  });
}

void HttpServer::wait() {
  while (!stopped_) {
    if (stop_requested_) {
      stop();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void HttpServer::handle_health(httplib::Response& res) const {
  const char* status = draining_ ? "stopping" : ready_ ? "ok" : "loading";
  res.status = ready_ && !draining_ ? 200 : 503;
  res.set_content(dump_json({{"status", status}}), "application/json");
}

void HttpServer::handle_stats(httplib::Response& res) const {
  auto served = model();
  if (!served) return reply_error(res, ApiStyle::OpenAI, not_ready_error());
  Json stats =
      metrics_.stats_json(served->engine->stats(), served->engine->model_info(), served->card);
  stats["model"] = model_name();
  stats["images"] = served->images.card();
  stats["in_flight"] = num_in_flight();
  res.set_content(dump_json(stats), "application/json");
}

void HttpServer::handle_metrics(httplib::Response& res) const {
  auto served = model();
  EngineStats stats = served ? served->engine->stats() : EngineStats{};
  res.set_content(metrics_.prometheus(stats, model_name()), "text/plain; version=0.0.4");
}

}  // namespace tandem::server
