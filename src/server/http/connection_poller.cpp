#include "server/http/connection_poller.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tandem::server::http {
namespace {

constexpr std::chrono::milliseconds kSweepInterval{100};
constexpr std::chrono::seconds kLingerTime{2};

void remote_of(const sockaddr_storage& addr, std::string& ip, int& port) {
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

}  // namespace

ConnectionPoller::ConnectionPoller(int listen_fd, const HttpLimits& limits, Callbacks callbacks)
    : listen_fd_(listen_fd), limits_(limits), callbacks_(std::move(callbacks)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0)
    fail("cannot create the HTTP poller: {}", std::strerror(errno));
  watch(listen_fd_, EPOLLIN, true);
  watch(wake_fd_, EPOLLIN, true);
}

ConnectionPoller::~ConnectionPoller() {
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void ConnectionPoller::watch(int fd, uint32_t events, bool add) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

void ConnectionPoller::run() {
  std::vector<epoll_event> events(256);
  auto last_sweep = Clock::now();
  while (!stopping_.load()) {
    int n = epoll_wait(epoll_fd_, events.data(), int(events.size()), int(kSweepInterval.count()));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      int fd = events[size_t(i)].data.fd;
      if (fd == listen_fd_) {
        accept_all();
      } else if (fd == wake_fd_) {
        adopt_returned();
      } else {
        on_event(fd, events[size_t(i)].events);
      }
    }
    auto now = Clock::now();
    if (now - last_sweep >= kSweepInterval) {
      sweep(now);
      last_sweep = now;
    }
  }
  {
    std::lock_guard<std::mutex> lock(returned_mu_);
    stopped_ = true;
    returned_.clear();
  }
  slots_.clear();
}

void ConnectionPoller::stop() {
  stopping_ = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof(one));
}

void ConnectionPoller::give_back(std::unique_ptr<Connection> conn, Next next) {
  std::lock_guard<std::mutex> lock(returned_mu_);
  if (stopped_) return;  // `conn` closes here
  returned_.emplace_back(std::move(conn), next);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof(one));
}

void ConnectionPoller::adopt_returned() {
  uint64_t count;
  [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof(count));
  std::vector<std::pair<std::unique_ptr<Connection>, Next>> returned;
  {
    std::lock_guard<std::mutex> lock(returned_mu_);
    returned.swap(returned_);
  }
  for (auto& [conn, next] : returned) adopt(std::move(conn), next);
}

void ConnectionPoller::adopt(std::unique_ptr<Connection> conn, Next next) {
  if (next == Next::Close) return;
  int fd = conn->fd();
  Slot& slot = slots_[fd];
  slot.conn = std::move(conn);
  slot.last_activity = Clock::now();
  watch(fd, EPOLLIN, true);
  if (next == Next::Linger) return to_linger(slot);
  to_idle(slot);
  if (!slot.conn->input().empty()) try_head(slot);  // a pipelined request already arrived
}

void ConnectionPoller::accept_all() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd =
        accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors (EMFILE, ENFILE, ENOBUFS): the pending connection stays queued
      // and the listener readable, so stop watching it until the next sweep rather than
      // spin; EAGAIN is simply the end of the queue.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        watch(listen_fd_, 0, false);
        accept_paused_ = true;
      }
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string ip;
    int port = 0;
    remote_of(addr, ip, port);
    ++num_open_;
    auto conn = std::make_unique<Connection>(fd, std::move(ip), port, num_open_);
    if (num_open_.load() > limits_.max_connections && !evict_one()) {
      std::string bytes = callbacks_.refuse(
          nullptr, 503,
          fmt::format("The server has {} connections open, its limit (--max-connections); "
                      "try again shortly.",
                      limits_.max_connections));
      conn->send_some(bytes);  // best effort: the socket is new, its buffer empty
      continue;                // closes it
    }
    adopt(std::move(conn), Next::KeepAlive);
  }
}

bool ConnectionPoller::evict_one() {
  std::optional<int> victim;
  Clock::time_point oldest = Clock::time_point::max();
  for (State wanted : {State::Idle, State::Head}) {
    for (auto& [fd, slot] : slots_) {
      if (slot.state == wanted && slot.last_activity < oldest) {
        oldest = slot.last_activity;
        victim = fd;
      }
    }
    if (victim) break;
  }
  if (!victim) return false;
  close_slot(*victim);
  return true;
}

void ConnectionPoller::close_slot(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  slots_.erase(fd);  // closes the socket
}

void ConnectionPoller::on_event(int fd, uint32_t events) {
  auto it = slots_.find(fd);
  if (it == slots_.end()) return;
  Slot& slot = it->second;
  if (slot.state == State::Writing) {
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) on_writable(slot);
  } else {
    on_readable(slot);
  }
}

void ConnectionPoller::on_readable(Slot& slot) {
  Connection& conn = *slot.conn;
  if (slot.state == State::Lingering) {
    Connection::Drain d = conn.read_available(1 << 20);
    conn.input().clear();
    if (d == Connection::Drain::Closed) close_slot(conn.fd());
    return;
  }
  // Read no more than a head may be: the buffer never outgrows the header limit here.
  size_t room =
      limits_.max_header_bytes + 1 - std::min(conn.input().size(), limits_.max_header_bytes + 1);
  Connection::Drain d = conn.read_available(std::max<size_t>(room, 1));
  if (d == Connection::Drain::Closed) return close_slot(conn.fd());
  if (d == Connection::Drain::Nothing) return;
  slot.last_activity = Clock::now();
  if (slot.state == State::Idle) {
    slot.state = State::Head;
    slot.deadline = slot.last_activity + limits_.header_timeout;
  }
  try_head(slot);
}

void ConnectionPoller::try_head(Slot& slot) {
  std::string& in = slot.conn->input();
  std::optional<size_t> end = find_head_end(in);
  if (!end || *end > limits_.max_header_bytes) {
    if (in.size() > limits_.max_header_bytes || (end && *end > limits_.max_header_bytes))
      refuse(slot, 431,
             fmt::format("The request line and headers are larger than {} bytes "
                         "(--max-header-bytes).",
                         limits_.max_header_bytes));
    return;
  }
  if (slot.state == State::Idle) {
    slot.state = State::Head;
    slot.deadline = Clock::now() + limits_.header_timeout;
  }
  auto parsed = parse_request_head(std::string_view(in).substr(0, *end));
  in.erase(0, *end);
  if (auto* refusal = std::get_if<HttpRefusal>(&parsed))
    return refuse(slot, refusal->status, refusal->message);
  RequestHead head = std::move(std::get<RequestHead>(parsed));
  head.request.remote_addr = slot.conn->remote_ip();
  head.request.remote_port = slot.conn->remote_port();
  if (std::optional<std::string> answer = callbacks_.probe(head))
    return start_write(slot, std::move(*answer), !head.keep_alive);
  int fd = slot.conn->fd();
  std::unique_ptr<Connection> conn = std::move(slot.conn);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  slots_.erase(fd);  // `slot` is gone from here on
  callbacks_.dispatch(std::move(conn), std::move(head));
}

void ConnectionPoller::refuse(Slot& slot, int status, const std::string& message) {
  start_write(slot, callbacks_.refuse(nullptr, status, message), true);
}

// Sent when epoll says the socket is writable (at once, for a fresh response): never from
// here, so pipelined requests cannot recurse through try_head.
void ConnectionPoller::start_write(Slot& slot, std::string bytes, bool close_after) {
  slot.out = std::move(bytes);
  slot.out_pos = 0;
  slot.close_after = close_after;
  slot.state = State::Writing;
  slot.deadline = Clock::now() + limits_.write_timeout;
  watch(slot.conn->fd(), EPOLLOUT, false);
}

void ConnectionPoller::on_writable(Slot& slot) {
  std::optional<size_t> n = slot.conn->send_some(std::string_view(slot.out).substr(slot.out_pos));
  if (!n) return close_slot(slot.conn->fd());
  if (*n > 0) {
    slot.out_pos += *n;
    slot.last_activity = Clock::now();
    slot.deadline = slot.last_activity + limits_.write_timeout;
  }
  if (slot.out_pos < slot.out.size()) return;
  slot.out.clear();
  if (slot.close_after) return to_linger(slot);
  to_idle(slot);
  if (!slot.conn->input().empty()) try_head(slot);
}

void ConnectionPoller::to_idle(Slot& slot) {
  bool started = !slot.conn->input().empty();
  slot.state = started ? State::Head : State::Idle;
  slot.deadline = Clock::now() + (started ? limits_.header_timeout : limits_.idle_timeout);
  watch(slot.conn->fd(), EPOLLIN, false);
}

void ConnectionPoller::to_linger(Slot& slot) {
  slot.conn->shutdown_write();
  slot.conn->input().clear();
  slot.state = State::Lingering;
  slot.deadline = Clock::now() + kLingerTime;
  watch(slot.conn->fd(), EPOLLIN, false);
}

void ConnectionPoller::sweep(Clock::time_point now) {
  if (accept_paused_) {
    watch(listen_fd_, EPOLLIN, false);
    accept_paused_ = false;
  }
  std::vector<int> expired;
  for (auto& [fd, slot] : slots_)
    if (slot.deadline <= now) expired.push_back(fd);
  for (int fd : expired) {
    Slot& slot = slots_.at(fd);
    if (slot.state == State::Head) {
      refuse(slot, 408,
             fmt::format("The request headers did not arrive within {} s (--header-timeout).",
                         limits_.header_timeout.count()));
    } else {
      close_slot(fd);  // idle past --idle-timeout, a stalled reader, or a linger that ended
    }
  }
}

}  // namespace tandem::server::http
