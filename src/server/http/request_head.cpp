#include "server/http/request_head.h"

#include "core/ascii.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace tandem::server::http {
namespace {

bool is_tchar(char c) {  // RFC 9110 token characters
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits the head into lines without their CRLF / LF; leading blank lines are skipped
// (RFC 9112 §2.2 lets a server ignore them before the request line).
std::vector<std::string_view> head_lines(std::string_view head) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < head.size()) {
    size_t nl = head.find('\n', pos);
    if (nl == std::string_view::npos) nl = head.size();
    std::string_view line = head.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl + 1;
    if (line.empty() && lines.empty()) continue;
    if (line.empty()) break;
    lines.push_back(line);
  }
  return lines;
}

HttpRefusal refusal(int status, std::string message) {
  return HttpRefusal{status, std::move(message)};
}

std::optional<HttpRefusal> parse_target(std::string_view target, httplib::Request& req) {
  if (target.empty() || target.front() != '/')
    return refusal(400, "The request target must be a path starting with '/'.");
  size_t q = target.find('?');
  auto path = percent_decode(target.substr(0, q), false);
  if (!path) return refusal(400, "The request path has a malformed percent-escape.");
  req.path = std::move(*path);
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
    if (!key || !value) return refusal(400, "The query string has a malformed percent-escape.");
    if (!key->empty()) req.params.emplace(std::move(*key), std::move(*value));
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
  }
  return std::nullopt;
}

std::optional<HttpRefusal> parse_request_line(std::string_view line, httplib::Request& req) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return refusal(400, "The request line is malformed.");
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return refusal(400, "The request method is malformed.");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.rfind("HTTP/", 0) == 0)
      return refusal(505,
                     fmt::format("HTTP version '{}' is not supported (1.0 and 1.1 are).", version));
    return refusal(400, "The request line is malformed.");
  }
  req.method = std::string(method);
  req.target = std::string(target);
  req.version = std::string(version);
  return parse_target(target, req);
}

std::optional<HttpRefusal> parse_header_line(std::string_view line, httplib::Headers& headers) {
  if (line.front() == ' ' || line.front() == '\t')
    return refusal(400, "Obsolete header line folding is not accepted.");
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
    return refusal(400, "A header line is malformed.");
  std::string_view value = trim_ows(line.substr(colon + 1));
  for (char c : value)
    if (c == '\0' || c == '\r' || c == '\n')
      return refusal(400, "A header value holds a control character.");
  headers.emplace(std::string(line.substr(0, colon)), std::string(value));
  return std::nullopt;
}

std::optional<HttpRefusal> read_content_length(const httplib::Request& req, BodyFraming& body) {
  if (req.get_header_value_count("Content-Length") > 1)
    return refusal(400, "The request has more than one Content-Length header.");
  std::string text = req.get_header_value("Content-Length");
  if (text.empty() || text.size() > 18 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return refusal(400, fmt::format("Content-Length '{}' is not a byte count.", text));
  body.kind = BodyFraming::Kind::Length;
  body.length = std::stoull(text);
  return std::nullopt;
}

std::optional<HttpRefusal> read_framing(const httplib::Request& req, BodyFraming& body) {
  bool has_length = req.has_header("Content-Length");
  bool has_transfer = req.has_header("Transfer-Encoding");
  if (has_length && has_transfer)
    return refusal(400, "The request has both Content-Length and Transfer-Encoding.");
  if (has_transfer) {
    if (req.version == "HTTP/1.0")
      return refusal(400, "Transfer-Encoding is not allowed in an HTTP/1.0 request.");
    if (req.get_header_value_count("Transfer-Encoding") > 1 ||
        ascii_lower(req.get_header_value("Transfer-Encoding")) != "chunked")
      return refusal(501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked).",
                                      req.get_header_value("Transfer-Encoding")));
    body.kind = BodyFraming::Kind::Chunked;
  } else if (has_length) {
    if (auto r = read_content_length(req, body)) return r;
  }
  return std::nullopt;
}

std::optional<HttpRefusal> read_coding(const httplib::Request& req, BodyFraming& body) {
  if (!req.has_header("Content-Encoding")) return std::nullopt;
  std::string coding = ascii_lower(req.get_header_value("Content-Encoding"));
  if (req.get_header_value_count("Content-Encoding") == 1) {
    if (coding == "identity") return std::nullopt;
    if (coding == "gzip" || coding == "x-gzip") body.coding = ContentCoding::Gzip;
    if (coding == "deflate") body.coding = ContentCoding::Deflate;
    if (coding == "br") body.coding = ContentCoding::Brotli;
    if (body.coding != ContentCoding::Identity) return std::nullopt;
  }
  return refusal(415, fmt::format("Content-Encoding '{}' is not supported (one of identity, "
                                  "gzip, deflate or br is).",
                                  req.get_header_value("Content-Encoding")));
}

std::optional<HttpRefusal> read_connection(RequestHead& head) {
  const httplib::Request& req = head.request;
  if (req.version == "HTTP/1.1" && req.get_header_value_count("Host") != 1)
    return refusal(400, "An HTTP/1.1 request must carry exactly one Host header.");
  head.keep_alive = req.version == "HTTP/1.1";
  std::string connection = ascii_lower(req.get_header_value("Connection"));
  if (connection.find("close") != std::string::npos) head.keep_alive = false;
  if (req.has_header("Expect")) {
    if (ascii_lower(req.get_header_value("Expect")) != "100-continue")
      return refusal(
          417, fmt::format("Expectation '{}' is not supported.", req.get_header_value("Expect")));
    head.body.expect_continue = true;
  }
  return std::nullopt;
}

}  // namespace

std::optional<size_t> find_head_end(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size() && (bytes[pos] == '\r' || bytes[pos] == '\n')) ++pos;
  for (size_t nl = bytes.find('\n', pos); nl != std::string_view::npos;
       nl = bytes.find('\n', nl + 1)) {
    size_t next = nl + 1;
    if (next < bytes.size() && bytes[next] == '\n') return next + 1;
    if (next + 1 < bytes.size() && bytes[next] == '\r' && bytes[next + 1] == '\n') return next + 2;
  }
  return std::nullopt;
}

std::variant<RequestHead, HttpRefusal> parse_request_head(std::string_view head) {
  std::vector<std::string_view> lines = head_lines(head);
  if (lines.empty()) return refusal(400, "The request is empty.");
  RequestHead out;
  if (auto r = parse_request_line(lines[0], out.request)) return *r;
  for (size_t i = 1; i < lines.size(); ++i)
    if (auto r = parse_header_line(lines[i], out.request.headers)) return *r;
  if (auto r = read_framing(out.request, out.body)) return *r;
  if (auto r = read_coding(out.request, out.body)) return *r;
  if (auto r = read_connection(out)) return *r;
  return out;
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  auto hex = [](char c) -> std::optional<int> {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return std::nullopt;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (s[i] != '%') {
      out.push_back(s[i]);
    } else {
      if (i + 2 >= s.size()) return std::nullopt;
      auto hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (!hi || !lo) return std::nullopt;
      out.push_back(char(*hi * 16 + *lo));
      i += 2;
    }
  }
  return out;
}

}  // namespace tandem::server::http
