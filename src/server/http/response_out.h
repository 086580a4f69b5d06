// Responses on the wire: the status line and headers, then a fixed body, or what a content
// provider produces — chunked to HTTP/1.1 clients, and delimited by closing the connection
// for HTTP/1.0 clients, which know no chunked encoding. Nothing is compressed: bodies are
// small JSON, and a stream must reach the client as soon as each event is written.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "server/http/connection.h"
#include "server/http/httplib_types.h"

namespace tandem::server::http {

struct ResponseContext {
  bool keep_alive = true;                // the connection may carry another request
  bool http10 = false;                   // the client spoke HTTP/1.0
  std::chrono::seconds idle_timeout{5};  // announced in Keep-Alive: timeout=N
};

// A fixed-body response as bytes (error answers and probes, sent by the poller).
std::string serialize_response(const httplib::Response& res, const ResponseContext& ctx);

// Writes `res` (fixed body or content provider) to `conn`. True when the connection can
// carry another request afterwards: the client asked for it and everything was written.
bool write_response(Connection& conn, httplib::Response& res, const ResponseContext& ctx,
                    const std::atomic<bool>& stopping);

// "OK", "Not Found", ... ("" for statuses it does not know).
const char* reason_phrase(int status);

}  // namespace tandem::server::http
