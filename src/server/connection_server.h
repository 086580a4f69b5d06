// An httplib::Server whose handlers can ask "is my client still there?".
//
// httplib 0.11 gives a handler no handle on its connection, and a non-streaming handler
// waits on the engine for the whole generation: without one, a client that hangs up
// would keep its sequence (and its KV blocks) busy to the end. So this server serves
// each connection itself (the keep-alive loop and a socket Stream, ~what httplib does)
// and publishes the connection to the handler thread; client_connected() peeks at it.
//
// The library is built with OpenSSL/zlib/brotli support and its class layouts depend on
// those macros: always include httplib through this header.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>

#include <array>
#include <string>

namespace tandem::server {

// One accepted socket, read through a small buffer (httplib reads request lines a byte at
// a time) and written with MSG_NOSIGNAL.
class ClientConnection : public httplib::Stream {
 public:
  struct Timeouts {
    time_t read_sec = 5, read_usec = 0, write_sec = 5, write_usec = 0;
  };
  ClientConnection(socket_t sock, Timeouts timeouts);

  bool is_readable() const override;
  bool is_writable() const override;  // writable within the timeout and the peer is there
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

  // False once the peer has closed its end or the socket failed. Never blocks.
  bool peer_alive() const;
  // Waits for the next request on a kept-alive connection; false on timeout or close.
  bool wait_for_request(time_t timeout_sec, const std::atomic<socket_t>& listener) const;

 private:
  bool buffered() const { return begin_ < end_; }

  socket_t sock_;
  Timeouts timeouts_;
  std::array<char, 4096> buffer_{};
  size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
};

class ConnectionServer : public httplib::Server {
 private:
  bool process_and_close_socket(socket_t sock) override;
};

// Whether the client of the request this thread is handling is still connected; true
// outside a ConnectionServer handler (nothing to ask).
bool client_connected();

}  // namespace tandem::server
