#include "server/http/response_out.h"

#include <fmt/format.h>

namespace tandem::server::http {
namespace {

enum class Delimiting : uint8_t { Length, Chunked, Close };

Delimiting delimiting_of(const httplib::Response& res, const ResponseContext& ctx) {
  if (!res.content_provider_ || res.content_length_ > 0) return Delimiting::Length;
  return ctx.http10 || !res.is_chunked_content_provider_ ? Delimiting::Close : Delimiting::Chunked;
}

std::string head_bytes(const httplib::Response& res, Delimiting d, const ResponseContext& ctx) {
  int status = res.status > 0 ? res.status : 200;  // httplib: unset means the handler succeeded
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_phrase(status));
  for (const auto& [name, value] : res.headers) {
    if (name == "Content-Length" || name == "Transfer-Encoding" || name == "Connection") continue;
    out += fmt::format("{}: {}\r\n", name, value);
  }
  if (d == Delimiting::Length) {
    size_t length = res.content_provider_ ? res.content_length_ : res.body.size();
    out += fmt::format("Content-Length: {}\r\n", length);
  } else if (d == Delimiting::Chunked) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  bool keep = ctx.keep_alive && d != Delimiting::Close;
  if (keep) {
    out += fmt::format("Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n",
                       ctx.idle_timeout.count());
  } else {
    out += "Connection: close\r\n";
  }
  out += "\r\n";
  return out;
}

// Drives a content provider until it calls done(), fails, or the server stops. `frame`
// wraps each piece for the wire (a chunk, or the bytes as they are).
template <typename Frame>
bool run_provider(Connection& conn, httplib::Response& res, const std::atomic<bool>& stopping,
                  Frame frame) {
  bool ok = true, done = false;
  size_t offset = 0;
  httplib::DataSink sink;
  sink.write = [&](const char* data, size_t n) {
    if (!ok) return false;
    if (n == 0) return true;
    ok = conn.write_all(frame(std::string_view(data, n)));
    offset += n;
    return ok;
  };
  sink.done = [&] { done = true; };
  sink.is_writable = [&] { return ok && conn.peer_alive(); };
  while (ok && !done && !stopping.load()) {
    size_t left = res.content_length_ > offset ? res.content_length_ - offset : 0;
    if (!res.content_provider_(offset, left, sink)) ok = false;
    if (res.content_length_ > 0 && offset >= res.content_length_) done = true;
  }
  res.content_provider_success_ = ok && done;
  return ok && done;
}

}  // namespace

std::string serialize_response(const httplib::Response& res, const ResponseContext& ctx) {
  return head_bytes(res, Delimiting::Length, ctx) + res.body;
}

bool write_response(Connection& conn, httplib::Response& res, const ResponseContext& ctx,
                    const std::atomic<bool>& stopping) {
  Delimiting d = delimiting_of(res, ctx);
  if (!res.content_provider_) return conn.write_all(serialize_response(res, ctx)) && ctx.keep_alive;
  if (!conn.write_all(head_bytes(res, d, ctx))) return false;
  switch (d) {
    case Delimiting::Length:
      return run_provider(conn, res, stopping, [](std::string_view s) { return std::string(s); }) &&
             ctx.keep_alive;
    case Delimiting::Chunked: {
      bool ok = run_provider(conn, res, stopping, [](std::string_view s) {
        return fmt::format("{:x}\r\n{}\r\n", s.size(), s);
      });
      return ok && conn.write_all("0\r\n\r\n") && ctx.keep_alive;
    }
    case Delimiting::Close:
      run_provider(conn, res, stopping, [](std::string_view s) { return std::string(s); });
      return false;  // the end of the body is the end of the connection
  }
  return false;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "";
  }
}

}  // namespace tandem::server::http
