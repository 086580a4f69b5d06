// Undoes a request body's content coding (gzip, deflate, br) as the body arrives, never
// producing more than the caller allows: a 1 MB gzip bomb stops at the body limit instead
// of inflating to a gigabyte. zlib and brotli are driven directly, one bounded output
// buffer at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "server/http/request_head.h"

namespace tandem::server::http {

class ContentDecoder {
 public:
  enum class Status : uint8_t { Ok, TooLarge, Corrupt };

  // Identity passes bytes through (still under the cap).
  static std::unique_ptr<ContentDecoder> create(ContentCoding coding);
  virtual ~ContentDecoder() = default;

  // Decodes `in`, appending to `out`; TooLarge as soon as `out` would pass `max_out`.
  virtual Status feed(std::string_view in, std::string& out, size_t max_out) = 0;
  // The body ended: Corrupt if the coded stream had not.
  virtual Status finish() = 0;
};

}  // namespace tandem::server::http
