// tandem's HTTP/1.1 server: a poller thread (connection_poller.h) that owns idle
// connections and reads request heads, and a pool of worker threads that serve one
// request each: check it before its body is read, read and decode the body under the
// limit, run the route's handler, write the response (a stream holds its worker until
// its last byte). The pool starts small and grows by a thread whenever a request would
// wait with every worker busy, up to --http-threads: a server that batches 1,024 streams
// needs that many workers under load, and a test server or an idle one never makes them.
//
// Why not httplib::Server (0.11, Debian's): it reads the whole body before any handler
// can look at the request (so the API key is checked after a gzip body was inflated
// without limit, and a chunked body is buffered whole), gives a request's headers no
// deadline, holds a thread per connection from accept on (so slow clients starve every
// other request), and writes chunked streams to HTTP/1.0 clients. Owning the read is what
// the limits in server_limits.h need; httplib's Request and Response stay the types that
// handlers see.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/common/server_limits.h"
#include "server/http/connection_poller.h"
#include "server/http/response_out.h"
#include "server/http/router.h"

namespace tandem::server::http {

struct TransportHooks {
  // Runs on a request's head before any of its body is read (API key, Host, content type):
  // fill `res` and return false to refuse; the body is then never read. Runs on the
  // poller thread for probe routes, so it must not block.
  std::function<bool(const httplib::Request& head, httplib::Response& res)> admit;
  // Fills the response for an error the transport decided (no route, a body past the
  // limit, a malformed or late request) in the API's own shape. `head` is null when no
  // head was parsed.
  std::function<void(const httplib::Request* head, int status, const std::string& message,
                     httplib::Response& res)>
      error;
  // After each response (optional): one log line.
  std::function<void(const httplib::Request&, const httplib::Response&)> log;
};

class HttpTransport {
 public:
  HttpTransport(HttpLimits limits, TransportHooks hooks);
  ~HttpTransport();  // stop()
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Routes are added before start().
  void route(std::string method, std::string pattern, Handler handler, Lane lane = Lane::Worker);
  HttpTransport& Get(const std::string& pattern, Handler handler) {
    route("GET", pattern, std::move(handler));
    return *this;
  }
  HttpTransport& Post(const std::string& pattern, Handler handler) {
    route("POST", pattern, std::move(handler));
    return *this;
  }

  // Binds and listens; returns the port (`port` 0: any free one). Throws tandem::Error.
  int bind(const std::string& host, int port);
  // Starts the poller and the workers.
  void start();
  // Closes the listener and every connection, and joins every thread. Requests still
  // being served see their client go (client_connected() false) and their reads fail.
  void stop();
  bool running() const { return running_.load(); }

  const HttpLimits& limits() const { return limits_; }
  int num_connections() const;
  // Worker threads made so far (at most limits().num_threads).
  int num_workers() const { return num_workers_.load(); }

 private:
  struct Job {
    std::unique_ptr<Connection> conn;
    RequestHead head;
  };

  void worker_loop();
  void add_worker();  // start(), or the poller thread (dispatch): never concurrently
  int max_workers() const;
  ConnectionPoller::Next serve(Connection& conn, RequestHead& head);
  ConnectionPoller::Next read_request_body(Connection& conn, RequestHead& head,
                                           const ResponseContext& ctx);
  ConnectionPoller::Next respond(Connection& conn, const httplib::Request& req,
                                 httplib::Response& res, const ResponseContext& ctx,
                                 bool body_unread);
  std::optional<std::string> answer_probe(RequestHead& head);
  std::string refusal_bytes(const httplib::Request* head, int status, const std::string& message);
  void fill_error(const httplib::Request* head, int status, const std::string& message,
                  httplib::Response& res) const;
  void fill_empty_error(const httplib::Request& req, httplib::Response& res) const;
  ResponseContext context_of(const RequestHead& head) const;

  HttpLimits limits_;
  TransportHooks hooks_;
  Router router_;
  std::optional<int> listen_fd_;  // the listening socket, from bind() to stop()
  std::unique_ptr<ConnectionPoller> poller_;
  std::thread poller_thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> running_{false};

  std::atomic<int> num_workers_{0};

  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<Job> jobs_;
  int idle_workers_ = 0;  // workers waiting for a job (jobs_mu_)
};

// Whether the client of the request this thread is serving is still connected; true
// outside a transport worker (nothing to ask).
bool client_connected();

}  // namespace tandem::server::http
