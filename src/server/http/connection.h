// One accepted client socket (non-blocking) with the bytes received from it and not yet
// consumed. The poller thread owns it while it waits for a request head; a worker owns it
// while a request is served (reading the body, running the handler, writing the response).
// Never both at once: ownership moves with the unique_ptr.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/body_reader.h"

namespace tandem::server::http {

using Clock = std::chrono::steady_clock;

class Connection : public ByteSource {
 public:
  // Takes the socket; `open_count` counts live connections (decremented when this closes).
  Connection(int fd, std::string remote_ip, int remote_port, std::atomic<int>& open_count);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_; }
  const std::string& remote_ip() const { return remote_ip_; }
  int remote_port() const { return remote_port_; }
  std::string& input() { return input_; }

  // Worker side, blocking with deadlines, and ending early once `stop` (set_stop) is
  // raised. fill() waits for more bytes until the read deadline and appends them to
  // `buffer`.
  void set_stop(const std::atomic<bool>* stop) { stop_ = stop; }
  void set_read_deadline(Clock::time_point deadline) { read_deadline_ = deadline; }
  Fill fill(std::string& buffer) override;
  // Writes all of `data`; false once the client has not taken a byte for `write_timeout`,
  // or has gone away, or the server stops.
  bool write_all(std::string_view data);
  void set_write_timeout(std::chrono::milliseconds timeout) { write_timeout_ = timeout; }
  // False once the peer has closed its end or the socket failed. Never blocks.
  bool peer_alive() const;

  // Poller side, never blocking.
  enum class Drain : uint8_t { Data, Nothing, Closed };
  // Reads what has arrived (at most `max` bytes) into input().
  Drain read_available(size_t max);
  // Sends what the socket takes now; nullopt on error.
  std::optional<size_t> send_some(std::string_view data);
  // Half-closes the sending side, for a lingering close.
  void shutdown_write();

 private:
  bool wait_writable() const;

  int fd_;
  std::string remote_ip_;
  int remote_port_;
  std::atomic<int>& open_count_;
  std::string input_;
  Clock::time_point read_deadline_{};
  const std::atomic<bool>* stop_ = nullptr;
  std::chrono::milliseconds write_timeout_{30000};
};

}  // namespace tandem::server::http
