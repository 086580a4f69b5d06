// The pages for people: GET / (chat with the served model) and GET /dashboard (the server
// at work), with their scripts and styles under GET /web/<file>. They are static files
// (web_files.h) and load without the API key; the scripts send the key the user enters
// with every API call they make. Off with `tandem serve --no-web-ui` (ServerOptions::web_ui).
//
// Every page is sent with a Content-Security-Policy that lets it load and connect to its
// own origin only (no CDN, no third-party request, no inline script), and an ETag, so a
// reload costs a 304.
#pragma once

#include <optional>
#include <string_view>

#include "server/http/transport.h"
#include "server/web/web_files.h"

namespace tandem::server {

// The embedded file called `name`, if any.
std::optional<EmbeddedFile> find_web_file(std::string_view name);

// Registers GET /, /dashboard and /web/<file> on `http`.
void install_web_pages(http::HttpTransport& http);

}  // namespace tandem::server
