// The one thread that owns every connection not being served: it accepts, reads request
// heads under the header and idle deadlines, answers probes and refusals itself, and hands
// each complete head to a worker, which gives the connection back when it is done.
//
// So a connection that drips its headers a byte a second costs a socket and a small buffer,
// never a thread, and is closed at its header deadline; a kept-alive connection waiting for
// its next request costs the same until its idle deadline. At the connection limit the
// idlest connection this thread holds is closed to make room (idle ones first, then ones
// still sending their head), so a new client — a health probe — is always served; only
// when every connection is in a worker's hands is a new one refused with a 503.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/common/server_limits.h"
#include "server/http/connection.h"
#include "server/http/request_head.h"

namespace tandem::server::http {

class ConnectionPoller {
 public:
  struct Callbacks {
    // A complete head the poller does not answer itself: the connection is the worker's now.
    std::function<void(std::unique_ptr<Connection>, RequestHead)> dispatch;
    // The bytes answering `head` on the poller thread (a probe route), or nullopt.
    std::function<std::optional<std::string>(RequestHead& head)> probe;
    // The bytes of a refusal, sent before closing (`head` is null when none was parsed).
    std::function<std::string(const httplib::Request* head, int status, const std::string& message)>
        refuse;
  };
  // What happens to a connection a worker gives back.
  enum class Next : uint8_t {
    KeepAlive,  // wait for its next request
    Linger,     // half-close and discard what the client still sends, then close: a refusal
                // sent before its body was read must not be lost to a reset
    Close,
  };

  ConnectionPoller(int listen_fd, const HttpLimits& limits, Callbacks callbacks);
  ~ConnectionPoller();
  ConnectionPoller(const ConnectionPoller&) = delete;
  ConnectionPoller& operator=(const ConnectionPoller&) = delete;

  // The poller thread's loop, until stop(); closes every connection it holds on the way out.
  void run();
  void stop();                                                  // any thread
  void give_back(std::unique_ptr<Connection> conn, Next next);  // any thread

  // Connections open now: the poller's and the workers'.
  int num_open() const { return num_open_.load(); }

 private:
  enum class State : uint8_t { Idle, Head, Writing, Lingering };
  struct Slot {
    std::unique_ptr<Connection> conn;
    State state = State::Idle;
    Clock::time_point deadline;
    Clock::time_point last_activity;
    std::string out;  // Writing: the bytes to send
    size_t out_pos = 0;
    bool close_after = false;  // Writing: linger once sent
  };

  void accept_all();
  void adopt(std::unique_ptr<Connection> conn, Next next);
  void adopt_returned();
  void on_event(int fd, uint32_t events);
  void on_readable(Slot& slot);
  void on_writable(Slot& slot);
  void try_head(Slot& slot);
  void start_write(Slot& slot, std::string bytes, bool close_after);
  void to_idle(Slot& slot);
  void to_linger(Slot& slot);
  void refuse(Slot& slot, int status, const std::string& message);
  void sweep(Clock::time_point now);
  bool evict_one();
  void close_slot(int fd);
  void watch(int fd, uint32_t events, bool add);

  int listen_fd_;
  const HttpLimits& limits_;
  Callbacks callbacks_;
  int epoll_fd_;  // both made by the constructor
  int wake_fd_;
  std::atomic<bool> stopping_{false};
  bool accept_paused_ = false;  // out of descriptors: the listener rests until the next sweep
  std::atomic<int> num_open_{0};
  std::unordered_map<int, Slot> slots_;

  std::mutex returned_mu_;
  std::vector<std::pair<std::unique_ptr<Connection>, Next>> returned_;
  bool stopped_ = false;  // under returned_mu_: give_back closes instead of queueing
};

}  // namespace tandem::server::http
