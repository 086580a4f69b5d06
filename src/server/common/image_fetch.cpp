// http(s) image URLs (image_source.h): parsed, checked against --allowed-media-domains at
// every hop (redirects are followed by hand, each to an allowed host, at most
// MediaFetchPolicy::max_redirects), downloaded as a stream that is dropped once it passes
// --max-image-bytes (after content decoding, so a gzip bomb is cut too) or the deadline.
#include <cctype>
#include <charconv>

#include "server/common/api_error.h"
#include "core/ascii.h"
#include "server/common/image_source.h"
#include "server/http/httplib_types.h"

namespace tandem::server {
namespace {

using Clock = std::chrono::steady_clock;

// The host part of an authority ("host", "host:port", "[v6]:port"): host and port.
bool split_authority(std::string_view authority, int default_port, HttpUrl& out) {
  std::string_view host = authority, port;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return false;
    port = rest.empty() ? rest : rest.substr(1);
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  out.port = default_port;
  if (!port.empty()) {
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
    if (ec != std::errc() || end != port.data() + port.size() || out.port < 1 || out.port > 65535)
      return false;
  }
  out.host = ascii_lower(host);
  return !out.host.empty();
}

struct Download {
  int status = 0;
  std::string location;  // of a redirect
  std::vector<uint8_t> body;
  bool too_large = false;
  bool timed_out = false;
};

[[noreturn]] void fetch_failed(const std::string& path, const std::string& url,
                               const std::string& why) {
  constexpr size_t kShown = 120;
  std::string shown = url.size() > kShown ? url.substr(0, kShown) + "..." : url;
  image_part_error(path, fmt::format("could not fetch image {}: {}", shown, why));
}

Download get_once(const HttpUrl& url, Clock::time_point deadline, const MediaLimits& limits) {
  httplib::Client client(url.origin());
  auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count() + 1;
  client.set_connection_timeout(time_t(left), 0);
  client.set_read_timeout(time_t(left), 0);
  client.set_write_timeout(time_t(left), 0);
  client.set_follow_location(false);  // each hop is checked here
  client.set_keep_alive(false);
  Download d;
  auto on_head = [&](const httplib::Response& r) {
    d.status = r.status;
    d.location = r.get_header_value("Location");
    if (r.has_header("Content-Length") && r.status == 200) {
      uint64_t declared = 0;
      const std::string v = r.get_header_value("Content-Length");
      std::from_chars(v.data(), v.data() + v.size(), declared);
      if (declared > limits.max_image_bytes) d.too_large = true;
    }
    return !d.too_large;
  };
  auto on_data = [&](const char* data, size_t n) {
    if (Clock::now() > deadline) d.timed_out = true;
    if (d.body.size() + n > limits.max_image_bytes) d.too_large = true;
    if (d.timed_out || d.too_large) return false;
    d.body.insert(d.body.end(), data, data + n);
    return true;
  };
  httplib::Result res =
      client.Get(url.target, httplib::Headers{{"Accept", "image/*"}}, on_head, on_data);
  if (!res && !d.too_large && !d.timed_out) {
    d.status = -1;
    d.location = httplib::to_string(res.error());
  }
  return d;
}

// A redirect's Location, absolute or absolute-path, resolved against `from`.
std::optional<HttpUrl> redirect_target(const HttpUrl& from, const std::string& location) {
  if (!location.empty() && location[0] == '/' && (location.size() < 2 || location[1] != '/')) {
    HttpUrl next = from;
    next.target = location;
    return next;
  }
  return parse_http_url(location);
}

}  // namespace

std::string HttpUrl::origin() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return fmt::format("{}://{}:{}", scheme, h, port);
}

std::optional<HttpUrl> parse_http_url(const std::string& url) {
  HttpUrl out;
  size_t colon = url.find("://");
  if (colon == std::string::npos) return std::nullopt;
  out.scheme = ascii_lower(std::string_view(url).substr(0, colon));
  if (out.scheme != "http" && out.scheme != "https") return std::nullopt;
  std::string_view rest = std::string_view(url).substr(colon + 3);
  size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  if (authority.find('@') != std::string_view::npos) return std::nullopt;  // no credentials
  if (!split_authority(authority, out.scheme == "https" ? 443 : 80, out)) return std::nullopt;
  std::string_view target = end == std::string_view::npos ? "" : rest.substr(end);
  target = target.substr(0, target.find('#'));
  if (target.empty() || target[0] != '/') out.target.push_back('/');
  out.target.append(target);
  for (char c : out.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return std::nullopt;
  return out;
}

std::vector<uint8_t> fetch_image(const std::string& url, const std::string& part_path,
                                 const MediaFetchPolicy& policy, const MediaLimits& limits) {
  if (policy.allowed_domains.empty())
    image_part_error(part_path,
                     "http(s) image URLs are not allowed (start the server with "
                     "--allowed-media-domains HOST,... to fetch from those hosts), or send the "
                     "image as a data: URL");
  std::optional<HttpUrl> target = parse_http_url(url);
  if (!target) fetch_failed(part_path, url, "not a valid http(s) URL");
  const Clock::time_point deadline = Clock::now() + policy.fetch_timeout;
  for (int hop = 0; hop <= policy.max_redirects; ++hop) {
    if (!media_host_allowed(target->host, policy.allowed_domains))
      fetch_failed(part_path, url,
                   fmt::format("host '{}' is not in --allowed-media-domains", target->host));
    Download d = get_once(*target, deadline, limits);
    if (d.too_large)
      image_part_error(part_path, fmt::format("image is over the limit of {} bytes "
                                              "(--max-image-bytes)",
                                              limits.max_image_bytes));
    if (d.timed_out || Clock::now() > deadline)
      fetch_failed(part_path, url,
                   fmt::format("no complete answer within {} s "
                               "(--media-fetch-timeout)",
                               policy.fetch_timeout.count()));
    if (d.status == -1) fetch_failed(part_path, url, "connection failed: " + d.location);
    if (d.status == 200) return std::move(d.body);
    bool redirect =
        d.status == 301 || d.status == 302 || d.status == 303 || d.status == 307 || d.status == 308;
    if (!redirect) fetch_failed(part_path, url, fmt::format("the server answered {}", d.status));
    target = redirect_target(*target, d.location);
    if (!target) fetch_failed(part_path, url, "redirected to an invalid URL");
  }
  fetch_failed(part_path, url, fmt::format("more than {} redirects", policy.max_redirects));
}

}  // namespace tandem::server
