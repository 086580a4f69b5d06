// An image part's encoded bytes, wherever the request says they are (image_parts.h): the
// base64 of a data: URL, a file under --allowed-local-media-path, or an http(s) URL on a host
// of --allowed-media-domains (media_fetch_policy.h: both off by default).
//
// Every failure, and every bytes past --max-image-bytes, is a 400 naming the message part
// ("messages[1].content[2]: ..."); nothing unbounded is held: base64 is sized before it is
// decoded, a file by fstat before it is read, a download as it streams (over the bound,
// past --media-fetch-timeout or redirected off the allowed hosts, it is dropped).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "media/media_limits.h"
#include "server/common/image_parts.h"
#include "server/common/media_fetch_policy.h"

namespace tandem::server {

// Whether `host` (lower case, no port) is one of `allowed` (see allowed_domains).
bool media_host_allowed(const std::string& host, const std::vector<std::string>& allowed);

// The encoded bytes of `part`, at most limits.max_image_bytes.
std::vector<uint8_t> read_image_bytes(const ImagePart& part, const MediaFetchPolicy& policy,
                                      const MediaLimits& limits);

// The pieces of an http(s) URL that a fetch needs; nullopt when it is not one (or carries
// credentials, which a fetch never sends).
struct HttpUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case; an IPv6 literal without its brackets
  int port = 0;
  std::string target;          // path and query, "/" at least
  std::string origin() const;  // "scheme://host:port", as httplib::Client takes it
};
std::optional<HttpUrl> parse_http_url(const std::string& url);

// Downloads `url` under `policy` (image_fetch.cpp); 400s naming `part_path`.
std::vector<uint8_t> fetch_image(const std::string& url, const std::string& part_path,
                                 const MediaFetchPolicy& policy, const MediaLimits& limits);

}  // namespace tandem::server
