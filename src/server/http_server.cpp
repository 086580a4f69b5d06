#include "server/http_server.h"

#include <fmt/format.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

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

// The error httplib itself decided on (no route, body too large, unreadable request).
ApiError library_error(const httplib::Request& req, int status, size_t max_body) {
  if (status == 404)
    return not_found_error(fmt::format("Unknown route: {} {}", req.method, req.path));
  if (status == 413) return payload_too_large_error(max_body);
  if (status < 500) return ApiError(status, "invalid_request_error", "The request is malformed.");
  return internal_error("Internal server error.");
}

}  // namespace

// Counts a request as in flight for as long as something holds it (a streaming response
// holds it until its last byte).
class HttpServer::InFlight {
 public:
  explicit InFlight(HttpServer& server) : server_(server) {
    std::lock_guard<std::mutex> lock(server_.flight_mu_);
    ++server_.in_flight_;
  }
  ~InFlight() {
    std::lock_guard<std::mutex> lock(server_.flight_mu_);
    --server_.in_flight_;
    server_.flight_cv_.notify_all();
  }

 private:
  HttpServer& server_;
};

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)) {
  size_t threads = size_t(std::max(options_.num_threads, 2));
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_.set_payload_max_length(options_.max_body_bytes);
  time_t io = time_t(options_.io_timeout.count());
  http_.set_read_timeout(io, 0);
  http_.set_write_timeout(io, 0);
  http_.set_keep_alive_max_count(100);
  if (options_.log_requests)
    http_.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      fmt::print(stderr, "{} {} {}\n", req.method, req.path, res.status);
    });
  install_routes();
  install_error_handlers();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::install_routes() {
  route("POST", "/v1/chat/completions", ApiStyle::OpenAI, handle_chat_completions);
  route("POST", "/v1/completions", ApiStyle::OpenAI, handle_completions);
  route("POST", "/v1/messages", ApiStyle::Anthropic, handle_messages);
  route("POST", "/v1/messages/count_tokens", ApiStyle::Anthropic, handle_count_tokens);
  route("POST", "/v1/responses", ApiStyle::OpenAI, handle_responses);
  route("GET", "/v1/models", ApiStyle::OpenAI, handle_models);
  route("GET", "/v1/models/(.+)", ApiStyle::OpenAI, handle_models);
  route("POST", "/tokenize", ApiStyle::OpenAI, handle_tokenize);
  route("POST", "/detokenize", ApiStyle::OpenAI, handle_detokenize);
  http_.Get("/health",
            [this](const httplib::Request&, httplib::Response& res) { handle_health(res); });
  http_.Get("/stats",
            [this](const httplib::Request&, httplib::Response& res) { handle_stats(res); });
  http_.Get("/metrics",
            [this](const httplib::Request&, httplib::Response& res) { handle_metrics(res); });
  install_web_routes();
}

// The pages are static and open (like /health): their scripts send the key themselves.
void HttpServer::install_web_routes() {
  if (options_.web_ui) install_web_pages(http_);
}

void HttpServer::install_error_handlers() {
  httplib::Server::HandlerWithResponse on_error = [this](const httplib::Request& req,
                                                         httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours already
    ApiError e = library_error(req, res.status, options_.max_body_bytes);
    reply_error(res, style_for_path(req.path), e);
    return httplib::Server::HandlerResponse::Handled;
  };
  http_.set_error_handler(std::move(on_error));
  // A last net: handlers catch everything themselves, but a throw must never reach httplib.
  http_.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        reply_error(res, style_for_path(req.path), internal_error("Internal server error."));
      });
}

void HttpServer::route(const char* method, const char* pattern, ApiStyle style, Handler handler) {
  auto fn = [this, style, handler](const httplib::Request& req, httplib::Response& res) {
    serve(style, handler, req, res);
  };
  if (std::string_view(method) == "GET") {
    http_.Get(pattern, fn);
  } else {
    http_.Post(pattern, fn);
  }
}

void HttpServer::serve(ApiStyle style, Handler handler, const httplib::Request& req,
                       httplib::Response& res) {
  auto guard = std::make_shared<InFlight>(*this);
  try {
    check_api_key(req);
    if (draining_) throw shutting_down_error();
    std::shared_ptr<const ServedModel> served = model();
    if (!served) throw not_ready_error();
    // httplib checks Content-Length; a chunked upload is only measured once read.
    if (req.body.size() > options_.max_body_bytes)
      throw payload_too_large_error(options_.max_body_bytes);
    ClientWatch watch;
    watch.connected = client_connected;
    watch.aborting = [this] { return aborting_.load(); };
    EndpointContext ctx{*served, metrics_, watch, model_name(), guard};
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
  std::string auth = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (auth.rfind(bearer, 0) == 0 && same_secret(auth.substr(bearer.size()), key)) return;
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

namespace {

// cpp-httplib (Debian's build) listens with a backlog of 5: a burst of clients connecting
// at once (a benchmark at concurrency 256) overflows it, and the kernel drops their SYNs,
// which costs each one a 1 s retry or a failed connection. Calling listen() again on the
// bound socket raises the backlog; the socket is found by its port.
void raise_listen_backlog(int port) {
  for (int fd = 3; fd < 4096; fd++) {
    int accepting = 0;
    socklen_t len = sizeof(accepting);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int bound = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                             : -1;
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

}  // namespace

void HttpServer::start() {
  if (options_.port == 0) {
    port_ = http_.bind_to_any_port(options_.host);
    if (port_ < 0) fail("cannot listen on {}: {}", options_.host, std::strerror(errno));
  } else {
    if (!http_.bind_to_port(options_.host, options_.port))
      fail("cannot listen on {}:{}: {}", options_.host, options_.port, std::strerror(errno));
    port_ = options_.port;
  }
  raise_listen_backlog(port_);
  listener_ = std::thread([this] { http_.listen_after_bind(); });
  // stop() is a no-op on a server not yet running: do not return before it runs.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!http_.is_running()) {
    if (std::chrono::steady_clock::now() > deadline) fail("the HTTP listener did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
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
    draining_ = true;
    std::unique_lock<std::mutex> lock(flight_mu_);
    flight_cv_.wait_for(lock, options_.drain_timeout, [this] { return in_flight_ == 0; });
    aborting_ = true;  // the rest are cancelled; they notice within one poll interval
    flight_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return in_flight_ == 0; });
    lock.unlock();
    http_.stop();
    if (listener_.joinable()) listener_.join();
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
  stats["in_flight"] = num_in_flight();
  res.set_content(dump_json(stats), "application/json");
}

void HttpServer::handle_metrics(httplib::Response& res) const {
  auto served = model();
  EngineStats stats = served ? served->engine->stats() : EngineStats{};
  res.set_content(metrics_.prometheus(stats, model_name()), "text/plain; version=0.0.4");
}

}  // namespace tandem::server
