#include "server/connection_server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace tandem::server {
namespace {

thread_local const ClientConnection* t_connection = nullptr;

// poll() one event with a timeout; >0 ready, 0 timeout, <0 error. Retries on EINTR.
int poll_socket(socket_t sock, short events, time_t sec, time_t usec) {
  pollfd p{sock, events, 0};
  int timeout_ms = int(sec * 1000 + usec / 1000);
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r > 0 && (p.revents & POLLNVAL)) return -1;
    return r;
  }
}

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof(text));
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof(text));
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

// Publishes the connection to handlers running on this thread, for its lifetime.
struct ConnectionScope {
  explicit ConnectionScope(const ClientConnection* c) { t_connection = c; }
  ~ConnectionScope() { t_connection = nullptr; }
};

}  // namespace

ClientConnection::ClientConnection(socket_t sock, Timeouts timeouts)
    : sock_(sock), timeouts_(timeouts) {}

bool ClientConnection::is_readable() const {
  return buffered() || poll_socket(sock_, POLLIN, timeouts_.read_sec, timeouts_.read_usec) > 0;
}

bool ClientConnection::is_writable() const {
  return poll_socket(sock_, POLLOUT, timeouts_.write_sec, timeouts_.write_usec) > 0 && peer_alive();
}

bool ClientConnection::peer_alive() const {
  if (buffered()) return true;
  int r = poll_socket(sock_, POLLIN, 0, 0);
  if (r == 0) return true;
  if (r < 0) return false;
  char byte;
  for (;;) {
    ssize_t n = ::recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return true;    // the client sent more (a pipelined request)
    if (n == 0) return false;  // orderly shutdown
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

ssize_t ClientConnection::read(char* ptr, size_t size) {
  if (!buffered()) {
    if (!is_readable()) return -1;
    if (size >= buffer_.size()) {
      for (;;) {
        ssize_t n = ::recv(sock_, ptr, size, 0);
        if (n < 0 && errno == EINTR) continue;
        return n;
      }
    }
    ssize_t n;
    do {
      n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    begin_ = 0;
    end_ = size_t(n);
  }
  size_t count = std::min(size, end_ - begin_);
  std::memcpy(ptr, buffer_.data() + begin_, count);
  begin_ += count;
  return ssize_t(count);
}

ssize_t ClientConnection::write(const char* ptr, size_t size) {
  if (poll_socket(sock_, POLLOUT, timeouts_.write_sec, timeouts_.write_usec) <= 0) return -1;
  for (;;) {
    ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

void ClientConnection::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    address_of(addr, ip, port);
}

void ClientConnection::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    address_of(addr, ip, port);
}

bool ClientConnection::wait_for_request(time_t timeout_sec,
                                        const std::atomic<socket_t>& listener) const {
  if (buffered()) return true;
  // Short polls, so that a stopping server does not wait out idle keep-alive clients.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_sec);
  while (listener != INVALID_SOCKET) {
    int r = poll_socket(sock_, POLLIN, 0, 10000);
    if (r != 0) return r > 0;
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return false;
}

bool ConnectionServer::process_and_close_socket(socket_t sock) {
  ClientConnection conn(
      sock, {read_timeout_sec_, read_timeout_usec_, write_timeout_sec_, write_timeout_usec_});
  ConnectionScope scope(&conn);
  bool ok = false;
  size_t remaining = keep_alive_max_count_;
  while (svr_sock_ != INVALID_SOCKET && remaining > 0 &&
         conn.wait_for_request(keep_alive_timeout_sec_, svr_sock_)) {
    bool closed = false;
    try {
      ok = process_request(conn, remaining == 1, closed, nullptr);
    } catch (...) {
      ok = false;  // handlers catch their own; this only guards the library's writing
    }
    if (!ok || closed) break;
    --remaining;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

bool client_connected() {
  return t_connection == nullptr || t_connection->peer_alive();
}

}  // namespace tandem::server
