// The per-API half of streaming: turns engine chunks into the API's SSE bytes. The
// response writer (response_writer.h) owns the waiting, the socket and the order of calls:
//   begin() once, chunk() for every chunk of every choice in arrival order (never an
//   Error chunk), then end() after every choice has finished — or error() instead, after
//   which the stream ends.
#pragma once

#include <string>

#include "engine/request.h"

namespace tandem::server {

class StreamEncoder {
 public:
  virtual ~StreamEncoder() = default;
  virtual std::string begin() = 0;
  virtual std::string chunk(int choice, const StreamChunk& chunk) = 0;
  virtual std::string end() = 0;
  virtual std::string error(const std::string& message) = 0;
};

// The facts every response repeats.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};

}  // namespace tandem::server
