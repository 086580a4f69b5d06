#include "server/http/transport.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/error.h"

namespace tandem::server::http {
namespace {

constexpr int kInitialWorkers = 8;  // workers made at start; the rest on demand

using Next = ConnectionPoller::Next;

thread_local const Connection* t_connection = nullptr;

// Publishes the connection to the handler running on this thread, for its lifetime.
struct ConnectionScope {
  explicit ConnectionScope(const Connection* c) { t_connection = c; }
  ~ConnectionScope() { t_connection = nullptr; }
};

// Each connection is a descriptor: raise the soft limit to the hard one, as servers do, so
// that the connection limit (and not a default of 1024 descriptors) is what binds.
void raise_descriptor_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int listen_socket(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    fail("cannot listen on {}:{}: {}", host, port, gai_strerror(rc));
  int fd = -1;
  int err = 0;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) break;
    err = errno;
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) fail("cannot listen on {}:{}: {}", host, port, std::strerror(err));
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6&>(addr).sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
}

const char* body_message(BodyStatus s) {
  switch (s) {
    case BodyStatus::Malformed:
      return "The request body is malformed (its chunked framing or content coding is broken).";
    case BodyStatus::Timeout:
      return "The request body did not arrive within {} s (--body-timeout).";
    default:
      return "";
  }
}

}  // namespace

HttpTransport::HttpTransport(HttpLimits limits, TransportHooks hooks)
    : limits_(std::move(limits)), hooks_(std::move(hooks)) {}

HttpTransport::~HttpTransport() {
  stop();
}

void HttpTransport::route(std::string method, std::string pattern, Handler handler, Lane lane) {
  router_.add(std::move(method), std::move(pattern), std::move(handler), lane);
}

int HttpTransport::bind(const std::string& host, int port) {
  raise_descriptor_limit();
  listen_fd_ = listen_socket(host, port);
  return bound_port(*listen_fd_);
}

void HttpTransport::start() {
  TANDEM_CHECK(listen_fd_.has_value(), "HttpTransport::start before bind");
  ConnectionPoller::Callbacks callbacks;
  callbacks.dispatch = [this](std::unique_ptr<Connection> conn, RequestHead head) {
    bool grow = false;
    {
      std::lock_guard<std::mutex> lock(jobs_mu_);
      jobs_.push_back(Job{std::move(conn), std::move(head)});
      jobs_cv_.notify_one();
      // More queued requests than idle workers: one would wait for a busy worker.
      grow = jobs_.size() > size_t(idle_workers_) && num_workers_.load() < max_workers();
    }
    if (grow) {
      try {
        add_worker();
      } catch (const std::system_error&) {
        // No thread to be had (a process or memory limit): the request waits for a busy
        // worker, as it would at --http-threads.
      }
    }
  };
  callbacks.probe = [this](RequestHead& head) { return answer_probe(head); };
  callbacks.refuse = [this](const httplib::Request* head, int status, const std::string& msg) {
    return refusal_bytes(head, status, msg);
  };
  poller_ = std::make_unique<ConnectionPoller>(*listen_fd_, limits_, std::move(callbacks));
  running_ = true;
  // A few workers from the start (before the poller, which adds the rest on demand).
  for (int i = 0; i < std::min(kInitialWorkers, max_workers()); ++i) add_worker();
  poller_thread_ = std::thread([this] { poller_->run(); });
}

int HttpTransport::max_workers() const {
  return std::max(limits_.num_threads, 1);
}

void HttpTransport::add_worker() {
  workers_.emplace_back([this] { worker_loop(); });
  num_workers_.fetch_add(1);
}

void HttpTransport::stop() {
  if (!running_.exchange(false)) return;
  stopping_ = true;
  poller_->stop();
  if (poller_thread_.joinable()) poller_thread_.join();  // not started if start() threw
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_.clear();  // queued requests are closed unanswered
    jobs_cv_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  num_workers_ = 0;
  poller_.reset();
  ::close(*listen_fd_);
  listen_fd_.reset();
}

int HttpTransport::num_connections() const {
  return poller_ ? poller_->num_open() : 0;
}

void HttpTransport::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(jobs_mu_);
      ++idle_workers_;
      jobs_cv_.wait(lock, [this] { return stopping_.load() || !jobs_.empty(); });
      --idle_workers_;
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Next next = serve(*job.conn, job.head);
    if (stopping_) continue;  // the poller is gone: the connection closes here
    poller_->give_back(std::move(job.conn), next);
  }
}

ResponseContext HttpTransport::context_of(const RequestHead& head) const {
  return ResponseContext{head.keep_alive, head.request.version == "HTTP/1.0", limits_.idle_timeout};
}

// Route, admission, body, handler, response; whatever fails is answered in the route's
// API shape, and a refusal sent before the body was read ends the connection.
Next HttpTransport::serve(Connection& conn, RequestHead& head) {
  httplib::Request& req = head.request;
  ResponseContext ctx = context_of(head);
  conn.set_write_timeout(limits_.write_timeout);
  conn.set_stop(&stopping_);
  ConnectionScope scope(&conn);  // the handler and a streaming response can ask about it
  httplib::Response res;
  bool has_body = head.body.kind != BodyFraming::Kind::None;
  const Route* route = router_.match(req);
  if (!route) {
    fill_error(&req, 404, fmt::format("Unknown route: {} {}", req.method, req.path), res);
    return respond(conn, req, res, ctx, has_body);
  }
  if (hooks_.admit && !hooks_.admit(req, res)) return respond(conn, req, res, ctx, has_body);
  if (Next n = read_request_body(conn, head, ctx); n != Next::KeepAlive) return n;
  try {
    route->handler(req, res);
  } catch (...) {  // handlers answer their own errors; a last net
    res = httplib::Response();
    fill_error(&req, 500, "Internal server error.", res);
  }
  return respond(conn, req, res, ctx, false);
}

// KeepAlive when the body is in req.body; otherwise what to do with the connection after
// the error response it has already been sent.
Next HttpTransport::read_request_body(Connection& conn, RequestHead& head,
                                      const ResponseContext& ctx) {
  httplib::Request& req = head.request;
  if (head.body.kind == BodyFraming::Kind::None) return Next::KeepAlive;
  BodyStatus status = BodyStatus::TooLarge;
  bool announced_too_large = head.body.kind == BodyFraming::Kind::Length &&
                             head.body.coding == ContentCoding::Identity &&
                             head.body.length > limits_.max_body_bytes;
  if (!announced_too_large) {
    if (head.body.expect_continue && !conn.write_all("HTTP/1.1 100 Continue\r\n\r\n"))
      return Next::Close;
    conn.set_read_deadline(Clock::now() + limits_.body_timeout);
    status = read_body(conn, conn.input(), head.body, limits_.max_body_bytes, req.body);
  }
  if (status == BodyStatus::Ok) return Next::KeepAlive;
  if (status == BodyStatus::Closed || status == BodyStatus::Stopped) return Next::Close;
  httplib::Response res;
  int code = status == BodyStatus::TooLarge ? 413 : status == BodyStatus::Timeout ? 408 : 400;
  std::string message =
      code == 413 ? fmt::format(
                        "Request body is larger than the limit of {} bytes "
                        "(--max-body-bytes).",
                        limits_.max_body_bytes)
                  : fmt::format(fmt::runtime(body_message(status)), limits_.body_timeout.count());
  fill_error(&req, code, message, res);
  req.body.clear();
  return respond(conn, req, res, ctx, true);
}

// A handler that set an error status without a body (a file that is not there) gets the
// error in the API's shape, as it would for a route that is not there.
void HttpTransport::fill_empty_error(const httplib::Request& req, httplib::Response& res) const {
  if (res.status < 400 || !res.body.empty() || res.content_provider_) return;
  std::string message = res.status == 404
                            ? fmt::format("Unknown route: {} {}", req.method, req.path)
                            : std::string(reason_phrase(res.status));
  fill_error(&req, res.status, message, res);
}

Next HttpTransport::respond(Connection& conn, const httplib::Request& req, httplib::Response& res,
                            const ResponseContext& ctx, bool body_unread) {
  fill_empty_error(req, res);
  ResponseContext out = ctx;
  if (body_unread) out.keep_alive = false;
  bool reusable = write_response(conn, res, out, stopping_);
  if (hooks_.log) hooks_.log(req, res);
  if (reusable) return Next::KeepAlive;
  return body_unread ? Next::Linger : Next::Close;
}

std::optional<std::string> HttpTransport::answer_probe(RequestHead& head) {
  const Route* route = router_.find(head.request.method, head.request.path);
  if (!route || route->lane != Lane::Probe || head.body.kind != BodyFraming::Kind::None)
    return std::nullopt;
  router_.match(head.request);
  httplib::Response res;
  ResponseContext ctx = context_of(head);
  if (!hooks_.admit || hooks_.admit(head.request, res)) {
    try {
      route->handler(head.request, res);
    } catch (...) {
      res = httplib::Response();
      fill_error(&head.request, 500, "Internal server error.", res);
    }
  }
  fill_empty_error(head.request, res);
  if (hooks_.log) hooks_.log(head.request, res);
  return serialize_response(res, ctx);
}

std::string HttpTransport::refusal_bytes(const httplib::Request* head, int status,
                                         const std::string& message) {
  httplib::Response res;
  fill_error(head, status, message, res);
  ResponseContext ctx;
  ctx.keep_alive = false;
  return serialize_response(res, ctx);
}

void HttpTransport::fill_error(const httplib::Request* head, int status, const std::string& message,
                               httplib::Response& res) const {
  res.status = status;
  if (hooks_.error) {
    hooks_.error(head, status, message, res);
  } else {
    res.set_content(message, "text/plain");
  }
}

bool client_connected() {
  return t_connection == nullptr || t_connection->peer_alive();
}

}  // namespace tandem::server::http
