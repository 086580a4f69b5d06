// A bounds-checked reader over a GGUF file's bytes: every read first checks that the file
// holds the bytes, and every failure names the file, the byte offset and what was being
// read. Little-endian, as GGUF is (tandem builds for little-endian hosts only).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tandem {

static_assert(std::endian::native == std::endian::little, "GGUF reading assumes a little-endian host");

class GgufCursor {
 public:
  GgufCursor(const std::byte* begin, size_t size, std::string source)
      : begin_(begin), pos_(begin), end_(begin + size), source_(std::move(source)) {}

  size_t offset() const { return size_t(pos_ - begin_); }
  size_t remaining() const { return size_t(end_ - pos_); }
  const std::string& source() const { return source_; }

  // The next n bytes (advancing past them).
  const std::byte* take(uint64_t n, std::string_view what) {
    if (n > remaining())
      fail("{}: truncated: {} needs {} bytes at offset {} but the file has {} left", source_, what,
           n, offset(), remaining());
    const std::byte* p = pos_;
    pos_ += n;
    return p;
  }

  template <typename T>
  T read(std::string_view what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }

  // A u64 length, then that many bytes. Lengths past `max_length` are refused before any
  // byte is touched (a key or tensor name of gigabytes is a hostile file, not a long name).
  std::string_view read_string(std::string_view what, uint64_t max_length) {
    uint64_t n = read<uint64_t>(what);
    if (n > remaining())
      fail("{}: {} at offset {} declares a string of {} bytes, but the file has {} left", source_,
           what, offset() - 8, n, remaining());
    if (n > max_length)
      fail("{}: {} at offset {} declares a string of {} bytes (the limit is {})", source_, what,
           offset() - 8, n, max_length);
    const std::byte* p = take(n, what);
    return {reinterpret_cast<const char*>(p), size_t(n)};
  }

 private:
  const std::byte* begin_;
  const std::byte* pos_;
  const std::byte* end_;
  std::string source_;
};

}  // namespace tandem
