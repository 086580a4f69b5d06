#include "server/http/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace tandem::server::http {
namespace {

// Slices of a blocking wait: a stopping server is noticed within one.
constexpr std::chrono::milliseconds kWaitSlice{100};

// poll() one event; >0 ready, 0 timeout, <0 error or hang-up without data.
int poll_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    int r = ::poll(&p, 1, int(std::max<int64_t>(timeout.count(), 0)));
    if (r < 0 && errno == EINTR) continue;
    if (r > 0 && (p.revents & (POLLNVAL | POLLERR))) return -1;
    return r;
  }
}

}  // namespace

Connection::Connection(int fd, std::string remote_ip, int remote_port, std::atomic<int>& open_count)
    : fd_(fd),
      remote_ip_(std::move(remote_ip)),
      remote_port_(remote_port),
      open_count_(open_count) {}

Connection::~Connection() {
  ::close(fd_);
  --open_count_;
}

ByteSource::Fill Connection::fill(std::string& buffer) {
  std::array<char, 64 << 10> chunk;
  for (;;) {
    if (stop_ && stop_->load()) return Fill::Stopped;
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(read_deadline_ - Clock::now());
    if (left.count() <= 0) return Fill::Timeout;
    int r = poll_for(fd_, POLLIN, std::min(left, kWaitSlice));
    if (r < 0) return Fill::Closed;
    if (r == 0) continue;
    ssize_t n = ::recv(fd_, chunk.data(), chunk.size(), 0);
    if (n > 0) {
      buffer.append(chunk.data(), size_t(n));
      return Fill::Data;
    }
    if (n == 0) return Fill::Closed;
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return Fill::Closed;
  }
}

bool Connection::write_all(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (!wait_writable()) return false;
  }
  return true;
}

bool Connection::wait_writable() const {
  auto deadline = Clock::now() + write_timeout_;
  for (;;) {
    if (stop_ && stop_->load()) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    int r = poll_for(fd_, POLLOUT, std::min(left, kWaitSlice));
    if (r != 0) return r > 0;
  }
}

bool Connection::peer_alive() const {
  if (!input_.empty()) return true;
  char byte;
  for (;;) {
    ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return true;    // the client sent more (a pipelined request)
    if (n == 0) return false;  // orderly shutdown
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

Connection::Drain Connection::read_available(size_t max) {
  std::array<char, 16 << 10> chunk;
  bool any = false;
  while (max > 0) {
    ssize_t n = ::recv(fd_, chunk.data(), std::min(max, chunk.size()), 0);
    if (n > 0) {
      input_.append(chunk.data(), size_t(n));
      max -= size_t(n);
      any = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return any ? Drain::Data : Drain::Closed;  // EOF or an error; what came first still counts
  }
  return any ? Drain::Data : Drain::Nothing;
}

std::optional<size_t> Connection::send_some(std::string_view data) {
  for (;;) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return size_t(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return std::nullopt;
  }
}

void Connection::shutdown_write() {
  ::shutdown(fd_, SHUT_WR);
}

}  // namespace tandem::server::http
