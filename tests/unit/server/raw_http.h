// A raw TCP client for the transport tests: what the official clients never send (a
// repeated Content-Length, HTTP/1.0, a head dripping in, a compressed bomb), and the
// exact bytes that come back. Plus the process's peak memory, for bounds on what one
// request may cost.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>

#include "server/common/json_text.h"

namespace tandem::server::testing {

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // False once the server has reset the connection (a refusal may come first).
  bool send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  }
  // Everything until the server closes, or `timeout` passes with nothing new.
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::string out;
    while (read_some(out, timeout)) {
    }
    return out;
  }
  // Reads until `marker` appears in what was read (or the timeout / close).
  std::string read_until(const std::string& marker,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::string out;
    while (out.find(marker) == std::string::npos && read_some(out, timeout)) {
    }
    return out;
  }
  // Whether the server has closed the connection (read returns 0) within `timeout`.
  bool closed_within(std::chrono::milliseconds timeout) {
    std::string sink;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  bool read_some(std::string& out, std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, int(timeout.count())) <= 0) return false;
    char buf[16384];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    out.append(buf, size_t(n));
    return true;
  }

  int fd_;
  bool connected_ = false;
};

struct RawReply {
  int status = 0;
  std::string head;
  std::string body;
  bool has_header(const std::string& line) const { return head.find(line) != std::string::npos; }
  Json json() const { return Json::parse(body, nullptr, false); }
};

// Splits the first response in `bytes` (a Content-Length body, or everything after the
// head for a response delimited by closing the connection).
inline RawReply parse_reply(const std::string& bytes) {
  RawReply r;
  size_t end = bytes.find("\r\n\r\n");
  if (bytes.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return r;
  r.status = std::stoi(bytes.substr(9, 3));
  r.head = bytes.substr(0, end + 2);
  r.body = bytes.substr(end + 4);
  size_t cl = r.head.find("Content-Length: ");
  if (cl != std::string::npos) r.body = r.body.substr(0, std::stoul(r.head.substr(cl + 16)));
  return r;
}

// One request on a fresh connection, read to the server's close or `timeout`.
inline RawReply raw_exchange(int port, const std::string& request,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  RawClient c(port);
  EXPECT_TRUE(c.connected());
  c.send(request);
  return parse_reply(c.read_all(timeout));
}

// "POST path HTTP/1.1" with a JSON body and the given extra header lines ("K: V\r\n"...).
inline std::string post_request(const std::string& path, const std::string& body,
                                const std::string& extra_headers = "",
                                const std::string& version = "HTTP/1.1") {
  return "POST " + path + " " + version +
         "\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline std::string get_request(const std::string& path, const std::string& extra_headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers +
         "\r\n";
}

// The process's peak resident memory since the last reset_peak_rss(), in bytes.
inline int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}
inline int64_t current_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}
// Resets the peak to the current resident size (Linux ≥ 4.0: clear_refs "5").
inline void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

}  // namespace tandem::server::testing
