#include "server/web/web_pages.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace tandem::server {
namespace {

// Only the page's own origin, for everything; `data:` images for the blank favicon.
constexpr const char* kPagePolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string_view content_type_of(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

// FNV-1a of the bytes: the file's version, for If-None-Match.
std::string etag_of(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return fmt::format("\"{:016x}\"", h);
}

// Sends `name`; a name that is not embedded is left to the 404 handler.
void send_file(std::string_view name, const httplib::Request& req, httplib::Response& res) {
  std::optional<EmbeddedFile> file = find_web_file(name);
  if (!file) {
    res.status = 404;
    return;
  }
  std::string etag = etag_of(file->bytes);
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  std::string_view type = content_type_of(name);
  if (type.rfind("text/html", 0) == 0) {
    res.set_header("Content-Security-Policy", kPagePolicy);
    res.set_header("Referrer-Policy", "no-referrer");
  }
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  res.set_content(std::string(file->bytes), std::string(type));
}

}  // namespace

std::optional<EmbeddedFile> find_web_file(std::string_view name) {
  std::span<const EmbeddedFile> files = embedded_web_files();
  auto it = std::find_if(files.begin(), files.end(),
                         [&](const EmbeddedFile& f) { return f.name == name; });
  if (it == files.end()) return std::nullopt;
  return *it;
}

void install_web_pages(http::HttpTransport& http) {
  http.Get("/", [](const httplib::Request& req, httplib::Response& res) {
    send_file("index.html", req, res);
  });
  http.Get("/dashboard", [](const httplib::Request& req, httplib::Response& res) {
    send_file("dashboard.html", req, res);
  });
  http.Get("/web/([A-Za-z0-9_.-]+)", [](const httplib::Request& req, httplib::Response& res) {
    send_file(req.matches[1].str(), req, res);
  });
}

}  // namespace tandem::server
