#include "loader/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace tandem {
namespace {

// Closes the descriptor on every path out of open_read; the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile MappedFile::open_read(const std::filesystem::path& path) {
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail("cannot stat {}: {}", path.string(), std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{} is not a regular file", path.string());
  size_t size = size_t(st.st_size);
  if (size == 0) return MappedFile(path, nullptr, 0);  // mmap refuses zero lengths
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED)
    fail("{}: cannot map {} bytes: {}", path.string(), size, std::strerror(errno));
  return MappedFile(path, static_cast<std::byte*>(p), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  unmap();
}

void MappedFile::unmap() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::advise_willneed(size_t offset, size_t length) const {
  if (!data_ || offset >= size_ || length == 0) return;
  // madvise wants a page-aligned start; widen the range down to the page boundary.
  size_t page = size_t(::sysconf(_SC_PAGESIZE));
  size_t begin = offset / page * page;
  size_t end = std::min(size_, offset + length);
  ::madvise(data_ + begin, end - begin, MADV_WILLNEED);  // advice only: errors are harmless
}

void MappedFile::release(const void* p, size_t length) const {
  const auto* b = static_cast<const std::byte*>(p);
  if (!data_ || b < data_ || b >= data_ + size_) return;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t offset = size_t(b - data_), end = std::min(size_, offset + length) / page * page;
  const size_t begin = (offset + page - 1) / page * page;                 // whole pages only
  if (begin < end) ::madvise(data_ + begin, end - begin, MADV_DONTNEED);  // advice: no error
}

}  // namespace tandem
