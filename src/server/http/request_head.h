// The request line and headers of one HTTP/1.x request, parsed from bytes into what the
// transport needs to route the request, check it and read its body.
//
// Refused with the status RFC 9110/9112 give: a malformed line (400), a version other
// than 1.0 and 1.1 (505), an HTTP/1.1 request without exactly one Host (400), more than
// one Content-Length or one that is not a plain number (400), Content-Length together
// with Transfer-Encoding (400: the two framings disagreeing is how requests are smuggled),
// a transfer coding other than chunked (501), a content coding other than one of
// identity/gzip/deflate/br (415), an expectation other than 100-continue (417).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "server/http/httplib_types.h"

namespace tandem::server::http {

enum class ContentCoding : uint8_t { Identity, Gzip, Deflate, Brotli };

struct BodyFraming {
  enum class Kind : uint8_t { None, Length, Chunked };
  Kind kind = Kind::None;
  uint64_t length = 0;  // Kind::Length: bytes on the wire
  ContentCoding coding = ContentCoding::Identity;
  bool expect_continue = false;  // the client waits for "100 Continue" before sending it
};

struct RequestHead {
  httplib::Request request;  // method, target, path (percent-decoded), params, version, headers
  BodyFraming body;
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close"; HTTP/1.0 never
};

struct HttpRefusal {
  int status = 400;
  std::string message;
};

// The length of the head at the start of `bytes` (through its blank line), or nullopt
// while it is incomplete. Lines end in CRLF or a bare LF.
std::optional<size_t> find_head_end(std::string_view bytes);

// Parses a complete head (the bytes find_head_end measured).
std::variant<RequestHead, HttpRefusal> parse_request_head(std::string_view head);

// "%41b" → "Ab"; nullopt for a malformed escape. `plus_is_space` for query strings.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

}  // namespace tandem::server::http
