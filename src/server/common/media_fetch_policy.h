// Where a request may read images from besides its own body (image_source.h reads them):
// the `tandem serve` flags --allowed-media-domains, --allowed-local-media-path and
// --media-fetch-timeout. Both are off by default: a server that reads what its clients name
// can be made to reach what they cannot (vLLM's flags of the same names turn them on).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tandem::server {

struct MediaFetchPolicy {
  // --allowed-media-domains: hosts http(s) images may come from ("example.com"; a leading
  // dot, ".example.com", also takes its subdomains). Empty: http(s) URLs are refused.
  std::vector<std::string> allowed_domains;
  // --allowed-local-media-path: file: URLs are read only at or under this directory (after
  // resolving symlinks). nullopt: file: URLs are refused.
  std::optional<std::filesystem::path> local_root;
  // --media-fetch-timeout: one download from connect to its last byte, redirects included.
  std::chrono::seconds fetch_timeout{10};
  int max_redirects = 3;  // each to an allowed host
};

}  // namespace tandem::server
