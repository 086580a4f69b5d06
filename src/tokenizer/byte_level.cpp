#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace {

struct ByteTables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8;  // UTF-8 of to_char, for appending without encoding
  std::array<int, 324> to_byte{};        // indexed by character; all 256 characters are < 324

  ByteTables() {
    to_byte.fill(-1);
    char32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_char[b] = printable ? char32_t(b) : next_extra++;
      to_byte[to_char[b]] = b;
      append_utf8(to_utf8[b], to_char[b]);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) {
  return tables().to_char[b];
}

int char_to_byte(char32_t c) {
  return c < 324 ? tables().to_byte[c] : -1;
}

void append_byte_level(std::string& out, std::string_view bytes) {
  const ByteTables& t = tables();
  size_t at = out.size();
  out.resize(at + 2 * bytes.size());  // every character of the alphabet is 1 or 2 bytes
  char* dst = out.data() + at;
  for (char ch : bytes) {
    const std::string& u = t.to_utf8[static_cast<unsigned char>(ch)];
    *dst++ = u[0];
    if (u.size() == 2) *dst++ = u[1];
  }
  out.resize(static_cast<size_t>(dst - out.data()));
}

void append_token_bytes(std::string& out, std::string_view token) {
  size_t start = out.size();
  for (size_t i = 0; i < token.size();) {
    int b = char_to_byte(next_char(token, i));
    if (b < 0) {
      out.resize(start);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(b));
  }
}

}  // namespace tandem::tok
