#include "cli/limit_flags.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "template/jinja.h"

namespace tandem::cli {
namespace {

using std::chrono::seconds;

// "16MiB", "64KiB" or plain bytes: how a size default is shown (parse_bytes reads all three).
std::string size_text(size_t bytes) {
  if (bytes != 0 && bytes % (size_t(1) << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
  if (bytes != 0 && bytes % 1024 == 0) return fmt::format("{}KiB", bytes >> 10);
  return std::to_string(bytes);
}

// A byte size flag ("16MiB", "64KB", "1000000"), into a size_t.
void add_size(CLI::App& app, const char* name, size_t& field, const char* help) {
  app.add_option_function<std::string>(
         name, [&field](const std::string& text) { field = size_t(parse_bytes(text)); }, help)
      ->default_str(size_text(field))
      ->type_name("SIZE");
}

// Whole seconds, into a std::chrono::seconds.
void add_seconds(CLI::App& app, const char* name, seconds& field, const char* help) {
  app.add_option_function<int64_t>(
         name, [&field](int64_t s) { field = seconds(s); }, help)
      ->default_str(std::to_string(field.count()))
      ->type_name("SECONDS");
}

void add_http_flags(CLI::App& app, server::HttpLimits& h) {
  add_size(app, "--max-body-bytes", h.max_body_bytes,
           "Largest request body, decoded (gzip/deflate/br or chunked alike)");
  add_size(app, "--max-header-bytes", h.max_header_bytes, "Largest request line + headers");
  app.add_option("--max-connections", h.max_connections,
                 "Client connections open at once (past it the idlest is closed)")
      ->capture_default_str();
  app.add_option("--http-threads", h.num_threads,
                 "Requests served at once (a streaming response holds one)")
      ->capture_default_str();
  add_seconds(app, "--header-timeout", h.header_timeout,
              "Seconds from a request's first byte to the end of its headers");
  add_seconds(app, "--body-timeout", h.body_timeout,
              "Seconds from the end of the headers to the end of the body");
  add_seconds(app, "--idle-timeout", h.idle_timeout,
              "Seconds a connection may wait for its next request");
  add_seconds(app, "--write-timeout", h.write_timeout,
              "Seconds a client may stop reading a response before it is dropped");
}

void add_request_flags(CLI::App& app, server::RequestLimits& r) {
  app.add_option("--max-json-depth", r.json.max_depth,
                 "Nesting of JSON a request may carry (bodies and JSON inside strings)")
      ->capture_default_str();
  app.add_option("--max-json-values", r.json.max_values, "Values in one JSON document")
      ->capture_default_str();
  app.add_option("--max-stop-strings", r.max_stop_strings, "Stop strings per request")
      ->capture_default_str();
  app.add_option("--max-stop-length", r.max_stop_bytes, "Bytes of one stop string")
      ->capture_default_str();
  app.add_option("--max-choices", r.max_choices, "Largest n")->capture_default_str();
  app.add_option("--max-request-sequences", r.max_sequences,
                 "Prompts x n of one /v1/completions request")
      ->capture_default_str();
  app.add_option("--max-request-tokens", r.max_prompt_tokens,
                 "Prompt tokens of one request, summed over its choices")
      ->capture_default_str();
}

// Images: the bounds of media/media_limits.h and where images may be read from.
void add_image_flags(CLI::App& app, MediaLimits& m, server::MediaFetchPolicy& fetch) {
  app.add_option_function<std::string>(
         "--max-image-bytes",
         [&m](const std::string& text) { m.max_image_bytes = uint64_t(parse_bytes(text)); },
         "Largest encoded image (after base64 decoding)")
      ->default_str(size_text(size_t(m.max_image_bytes)))
      ->type_name("SIZE");
  app.add_option("--max-image-pixels", m.max_image_pixels,
                 "Largest image, width x height as its header declares (refused before decoding)")
      ->capture_default_str();
  app.add_option("--max-images-per-request", m.max_images_per_request,
                 "Images in one request, over all its messages")
      ->capture_default_str();
  app.add_option("--allowed-media-domains", fetch.allowed_domains,
                 "Hosts http(s) image URLs may be fetched from, comma-separated ('.example.com': "
                 "the domain and its subdomains). Default: none (only data: URLs)")
      ->delimiter(',');
  app.add_option_function<std::string>(
         "--allowed-local-media-path", [&fetch](const std::string& dir) { fetch.local_root = dir; },
         "Directory file: image URLs may be read from (symlinks resolved; nothing outside "
         "it). Default: none")
      ->type_name("DIR");
  add_seconds(app, "--media-fetch-timeout", fetch.fetch_timeout,
              "Seconds one image download may take, redirects included");
}

void add_template_flags(CLI::App& app, server::TemplateLimits& t) {
  app.add_option("--max-template-iterations", t.max_iterations,
                 "Loop iterations + macro calls of one chat-template render")
      ->capture_default_str();
  add_size(app, "--max-template-output", t.max_output_bytes, "Largest rendered chat prompt");
  add_size(app, "--max-template-memory", t.max_memory_bytes,
           "Memory one chat-template render may allocate in total");
  app.add_option("--max-template-depth", t.max_depth,
                 "Nested macro calls and recursive loops in a chat template")
      ->capture_default_str();
}

void add_grammar_flags(CLI::App& app, server::GrammarCompileLimits& g) {
  add_size(app, "--max-grammar-bytes", g.max_spec_bytes,
           "Largest output constraint (JSON schema, regex, choices or GBNF), as text");
  app.add_option("--max-grammar-insts", g.max_insts,
                 "Instructions of one compiled output constraint (repetitions unrolled)")
      ->capture_default_str();
}

}  // namespace

void add_limit_flags(CLI::App& serve, server::ServerLimits& limits,
                     std::vector<std::string>& allowed_hosts) {
  add_http_flags(serve, limits.http);
  add_request_flags(serve, limits.request);
  add_template_flags(serve, limits.request.chat_template);
  add_image_flags(serve, limits.request.media, limits.request.media_fetch);
  add_grammar_flags(serve, limits.request.grammar);
  serve
      .add_option("--allowed-hosts", allowed_hosts,
                  "Host names the server answers, comma-separated ('*': any; '.example.com': "
                  "the domain and its subdomains). Default: IP addresses, localhost and this "
                  "machine's name; any host when --api-key is set")
      ->delimiter(',');
}

void check_limits(const server::ServerLimits& limits) {
  auto at_least = [](const char* flag, int64_t value, int64_t min) {
    if (value < min) fail("{} must be at least {} (got {})", flag, min, value);
  };
  const server::HttpLimits& h = limits.http;
  at_least("--max-body-bytes", int64_t(h.max_body_bytes), 1);
  at_least("--max-header-bytes", int64_t(h.max_header_bytes), 1024);
  at_least("--max-connections", h.max_connections, 1);
  at_least("--http-threads", h.num_threads, 1);
  for (auto [flag, s] : {std::pair{"--header-timeout", h.header_timeout},
                         {"--body-timeout", h.body_timeout},
                         {"--idle-timeout", h.idle_timeout},
                         {"--write-timeout", h.write_timeout}})
    at_least(flag, s.count(), 1);
  const server::RequestLimits& r = limits.request;
  at_least("--max-json-depth", r.json.max_depth, 1);
  // The template converts request JSON recursively, refusing past 512 levels.
  if (r.json.max_depth > 256)
    fail("--max-json-depth must be at most 256 (got {})", r.json.max_depth);
  at_least("--max-json-values", int64_t(r.json.max_values), 1);
  at_least("--max-choices", r.max_choices, 1);
  at_least("--max-request-sequences", int64_t(r.max_sequences), 1);
  at_least("--max-request-tokens", r.max_prompt_tokens, 1);
  at_least("--max-stop-length", int64_t(r.max_stop_bytes), 1);
  at_least("--max-image-bytes", int64_t(r.media.max_image_bytes), 1);
  at_least("--max-image-pixels", int64_t(r.media.max_image_pixels), 1);
  at_least("--max-images-per-request", r.media.max_images_per_request, 1);
  at_least("--media-fetch-timeout", r.media_fetch.fetch_timeout.count(), 1);
  if (r.media_fetch.local_root && !std::filesystem::is_directory(*r.media_fetch.local_root))
    fail("--allowed-local-media-path: '{}' is not a directory", r.media_fetch.local_root->string());
  const server::TemplateLimits& t = r.chat_template;
  at_least("--max-template-iterations", t.max_iterations, 1);
  at_least("--max-template-output", int64_t(t.max_output_bytes), 1);
  at_least("--max-template-memory", int64_t(t.max_memory_bytes), 1);
  at_least("--max-template-depth", t.max_depth, 1);
  at_least("--max-grammar-bytes", int64_t(r.grammar.max_spec_bytes), 1);
  at_least("--max-grammar-insts", int64_t(r.grammar.max_insts), 1);
  if (t.max_depth > jinja::kMaxRenderDepth)
    fail("--max-template-depth must be at most {} (got {})", jinja::kMaxRenderDepth, t.max_depth);
}

}  // namespace tandem::cli
