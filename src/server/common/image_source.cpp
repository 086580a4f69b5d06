#include "server/common/image_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <system_error>

#include "core/base64.h"
#include "server/common/api_error.h"

namespace tandem::server {
namespace {

std::string size_text(uint64_t bytes) {
  return bytes >= (1u << 20) && bytes % (1u << 20) == 0 ? fmt::format("{} MiB", bytes >> 20)
                                                        : fmt::format("{} bytes", bytes);
}

[[noreturn]] void too_large(const std::string& path, uint64_t bytes, const MediaLimits& limits) {
  image_part_error(path, fmt::format("image is {} bytes, over the limit of {} (--max-image-bytes)",
                                     bytes, size_text(limits.max_image_bytes)));
}

std::vector<uint8_t> decode_data(const ImagePart& part, const MediaLimits& limits) {
  size_t size = base64::decoded_size(part.payload);
  if (size > limits.max_image_bytes) too_large(part.path, size, limits);
  std::string why;
  std::optional<std::vector<uint8_t>> bytes = base64::decode(part.payload, &why);
  if (!bytes) image_part_error(part.path, "image data is not valid base64: " + why);
  return std::move(*bytes);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = char(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// "file:///a/b%20c" (or "file:/a/b", "file://localhost/a/b") -> "/a/b c".
std::string file_url_path(const ImagePart& part) {
  std::string_view rest = std::string_view(part.payload).substr(5);  // after "file:"
  if (rest.substr(0, 2) == "//") {
    rest.remove_prefix(2);
    size_t slash = rest.find('/');
    std::string_view host = rest.substr(0, slash);
    if (!host.empty() && host != "localhost")
      image_part_error(part.path, fmt::format("file: URLs must name this machine, not '{}'", host));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  }
  rest = rest.substr(0, rest.find_first_of("?#"));
  std::string path;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '%') {
      path += rest[i];
      continue;
    }
    int hi = i + 2 < rest.size() ? hex_value(rest[i + 1]) : -1;
    int lo = i + 2 < rest.size() ? hex_value(rest[i + 2]) : -1;
    if (hi < 0 || lo < 0) image_part_error(part.path, "file: URL has a malformed %-escape");
    path += char(hi * 16 + lo);
    i += 2;
  }
  if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos)
    image_part_error(part.path, "file: URL must hold an absolute path");
  return path;
}

// Resolved (symlinks followed), the file must be at or under the root, itself resolved.
std::filesystem::path checked_local_path(const ImagePart& part, const std::filesystem::path& root) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(file_url_path(part), ec);
  if (ec) image_part_error(part.path, "file: URL names no readable file");
  std::filesystem::path base = std::filesystem::canonical(root, ec);
  if (ec || std::mismatch(base.begin(), base.end(), real.begin(), real.end()).first != base.end())
    image_part_error(part.path, "file: URL is outside --allowed-local-media-path");
  return real;
}

std::vector<uint8_t> read_local(const ImagePart& part, const MediaFetchPolicy& policy,
                                const MediaLimits& limits) {
  if (!policy.local_root)
    image_part_error(part.path,
                     "file: URLs are not allowed (start the server with "
                     "--allowed-local-media-path DIR to allow files under DIR)");
  std::filesystem::path path = checked_local_path(part, *policy.local_root);
  // O_NOFOLLOW: the resolved path's last step cannot have become a symlink since.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) image_part_error(part.path, "file: URL names no readable file");
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    image_part_error(part.path, "file: URL does not name a regular file");
  if (uint64_t(st.st_size) > limits.max_image_bytes)
    too_large(part.path, uint64_t(st.st_size), limits);
  std::vector<uint8_t> bytes(size_t(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  bytes.resize(got);  // a file that shrank meanwhile is read as it now is
  return bytes;
}

}  // namespace

bool media_host_allowed(const std::string& host, const std::vector<std::string>& allowed) {
  for (const std::string& entry : allowed) {
    std::string e;
    for (char c : entry) e += char(std::tolower(static_cast<unsigned char>(c)));
    if (e == host) return true;
    if (e.size() > 1 && e[0] == '.' &&
        (host == e.substr(1) ||
         (host.size() > e.size() && host.compare(host.size() - e.size(), e.size(), e) == 0)))
      return true;
  }
  return false;
}

std::vector<uint8_t> read_image_bytes(const ImagePart& part, const MediaFetchPolicy& policy,
                                      const MediaLimits& limits) {
  switch (part.source) {
    case ImageSource::kData:
      return decode_data(part, limits);
    case ImageSource::kFile:
      return read_local(part, policy, limits);
    case ImageSource::kHttp:
      return fetch_image(part.payload, part.path, policy, limits);
  }
  image_part_error(part.path, "unknown image source");
}

}  // namespace tandem::server
