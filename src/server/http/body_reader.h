// Reads one request body as its framing (Content-Length or chunked) and content coding
// describe, decoding as it goes: the decoded body never passes `max_bytes`, the bytes on
// the wire are bounded by the same figure, and nothing past the limit is read into memory.
// Bytes that follow the body (a pipelined request) are left in the buffer.
#pragma once

#include <cstddef>
#include <string>

#include "server/http/request_head.h"

namespace tandem::server::http {

// Where body bytes come from: a connection, or a string in tests and fuzzers.
class ByteSource {
 public:
  enum class Fill : uint8_t { Data, Closed, Timeout, Stopped };
  virtual ~ByteSource() = default;
  // Appends at least one byte to `buffer`, or says why it cannot.
  virtual Fill fill(std::string& buffer) = 0;
};

enum class BodyStatus : uint8_t {
  Ok,
  TooLarge,   // 413: decoded (or on the wire) past max_bytes
  Malformed,  // 400: chunk framing or the coded stream is broken
  Timeout,    // 408: the source timed out
  Closed,     // the client went away (nothing to answer)
  Stopped,    // the server is stopping
};

// `buffer` holds bytes already received after the head; on return it holds those after
// the body. The decoded body is appended to `body`.
BodyStatus read_body(ByteSource& source, std::string& buffer, const BodyFraming& framing,
                     size_t max_bytes, std::string& body);

}  // namespace tandem::server::http
