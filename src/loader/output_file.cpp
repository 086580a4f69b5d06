#include "loader/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tandem {

OutputFile::OutputFile(std::filesystem::path path) : path_(std::move(path)) {
  tmp_ = path_;
  tmp_ += ".tmp";
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create {}: {}", tmp_.string(), std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void OutputFile::write_at(const void* data, size_t bytes, uint64_t offset) {
  TANDEM_CHECK(fd_ >= 0, "{} already committed", path_.string());
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    // Linux writes at most ~2 GB per call; 1 GB pieces keep every call whole.
    ssize_t n = ::pwrite(fd_, p, std::min<size_t>(bytes, size_t(1) << 30), off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail("cannot write {} bytes at offset {} of {}: {}", bytes, offset, tmp_.string(),
           n < 0 ? std::strerror(errno) : "no progress");
    p += n;
    bytes -= size_t(n);
    offset += uint64_t(n);
  }
}

void OutputFile::commit() {
  TANDEM_CHECK(fd_ >= 0, "{} already committed", path_.string());
  int rc = ::close(fd_);
  fd_ = -1;
  std::error_code ec;
  if (rc != 0) {
    int err = errno;
    std::filesystem::remove(tmp_, ec);
    fail("cannot close {}: {}", tmp_.string(), std::strerror(err));
  }
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    std::string why = ec.message();
    std::filesystem::remove(tmp_, ec);
    fail("cannot rename {} to {}: {}", tmp_.string(), path_.string(), why);
  }
}

}  // namespace tandem
