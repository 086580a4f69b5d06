// Every limit the server enforces, in one place. Each field is a `tandem serve` flag
// (src/cli/limit_flags.cpp registers them; docs/limits.md lists them), and
// every refusal names the flag that set it, so an operator who meets one knows what to raise.
//
// The defaults are sized so that no real client meets them, while one request can cost the
// server only a bounded amount: memory (decoded body, parsed JSON, stop strings, template
// allocations), CPU (JSON parsing is linear; template iterations; prompt tokens) and time
// (header, body, idle and write deadlines).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "media/media_limits.h"
#include "server/common/media_fetch_policy.h"

namespace tandem::server {

// Parsing JSON from a client: the request body, and JSON carried inside its strings
// (tool_calls[].function.arguments).
struct JsonLimits {
  int max_depth = 100;                  // --max-json-depth: nesting of objects and arrays
  size_t max_values = size_t(1) << 20;  // --max-json-values: values in one document
};

// The bounds of one chat-template render (the template comes with the model folder).
struct TemplateLimits {
  int64_t max_iterations = 1'000'000;  // --max-template-iterations: loop bodies + macro calls
  size_t max_output_bytes = size_t(16) << 20;   // --max-template-output: the rendered prompt
  size_t max_memory_bytes = size_t(128) << 20;  // --max-template-memory: all it allocates
  int max_depth = 200;  // --max-template-depth: macro / recursive-loop nesting
};

// Compiling a request's output constraint (a JSON schema, regex, choice list or GBNF
// grammar; structured_output.h) on its HTTP thread, before the engine sees it. Compiling is
// linear in both: 1 MiB of GBNF (30,000 rules) compiles in about 0.3 s on one core.
struct GrammarCompileLimits {
  size_t max_spec_bytes = size_t(1) << 20;  // --max-grammar-bytes: the spec's canonical text
  size_t max_insts = 4'000'000;  // --max-grammar-insts: the compiled program (repeats unrolled)
};

// What one generation request may ask for.
struct RequestLimits {
  JsonLimits json;
  TemplateLimits chat_template;
  GrammarCompileLimits grammar;
  size_t max_stop_strings = 16;  // --max-stop-strings: entries of stop / stop_sequences
  size_t max_stop_bytes = 1024;  // --max-stop-length: bytes of one stop string
  int max_choices = 128;         // --max-choices: n (OpenAI's own limit)
  size_t max_sequences = 1024;   // --max-request-sequences: prompts × n of one request
  int64_t max_prompt_tokens = int64_t(1) << 20;  // --max-request-tokens: Σ prompt tokens × n
  // Images: --max-image-bytes, --max-image-pixels, --max-images-per-request (the bounds of
  // media/media_limits.h), and where images may be read from besides the body.
  MediaLimits media;
  MediaFetchPolicy media_fetch;
};

// The HTTP transport: bodies, connections and deadlines.
struct HttpLimits {
  size_t max_body_bytes = size_t(16) << 20;    // --max-body-bytes: decoded, however it is sent
  size_t max_header_bytes = size_t(64) << 10;  // --max-header-bytes: request line + headers
  int max_connections = 2048;                  // --max-connections: open client connections at once
  // --http-threads: requests handled at once (a stream holds one), as many as `--batch
  // auto` may batch (kMaxAutoRows); made on demand, so an idle server holds a few.
  int num_threads = 1024;
  std::chrono::seconds header_timeout{10};  // --header-timeout: first byte → end of headers
  std::chrono::seconds body_timeout{60};    // --body-timeout: end of headers → end of body
  std::chrono::seconds idle_timeout{30};    // --idle-timeout: a connection with no request
  std::chrono::seconds write_timeout{30};   // --write-timeout: a client that stops reading
};

struct ServerLimits {
  HttpLimits http;
  RequestLimits request;
};

}  // namespace tandem::server
