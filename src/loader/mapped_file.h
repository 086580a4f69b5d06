// A whole file mapped read-only into memory. The mapping lives as long as the object;
// tensors that point into it hold a shared_ptr to it.
//
// PROT_READ + MAP_PRIVATE: pages come straight from the page cache (no second copy of the
// file in memory, shared with every other process mapping the same checkpoint), and a
// stray write through a tensor's `data` faults instead of reaching the file on disk.
// No MAP_POPULATE and no advice at open: opening a folder only parses headers. Readahead
// stays the kernel's default (MADV_NORMAL), not MADV_SEQUENTIAL, because the CPU backend
// rereads every weight each step and SEQUENTIAL would let the kernel drop pages behind the
// reader. Callers about to stream a tensor (an upload to the GPU) ask for it with
// advise_willneed(), which starts the read in the background.
#pragma once

#include <cstddef>
#include <filesystem>

namespace tandem {

class MappedFile {
 public:
  // Maps an existing regular file. An empty file maps to size() == 0, data() == nullptr.
  static MappedFile open_read(const std::filesystem::path& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // Starts reading [offset, offset + length) into the page cache in the background.
  void advise_willneed(size_t offset, size_t length) const;
  // Drops this process's pages of the whole pages of [p, p + length) that lie in the mapping
  // (MADV_DONTNEED: they leave the resident set; a later read maps them again from the page
  // cache or the file, so the bytes never change). For a tensor the backend has copied.
  void release(const void* p, size_t length) const;

 private:
  MappedFile(std::filesystem::path path, std::byte* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void unmap();

  std::filesystem::path path_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tandem
