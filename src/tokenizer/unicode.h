// UTF-8 and Unicode facts the tokenizer needs, each matching the Rust definition that
// Hugging Face `tokenizers` uses (char::is_whitespace, char::is_numeric, the `regex` crate's
// \w, String::from_utf8_lossy), so that our splits fall where theirs do.
// Every function taking a std::string_view of text expects valid UTF-8 unless it says
// otherwise; Tokenizer::encode makes its input valid first (to_valid_utf8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Byte length of the character whose lead byte is `lead` (1 for a stray byte).
inline size_t utf8_char_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the character at s[i] (valid UTF-8) and advances i past it.
inline char32_t next_char(std::string_view s, size_t& i) {
  unsigned char b0 = static_cast<unsigned char>(s[i]);
  size_t n = utf8_char_len(b0);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b0;
  }
  char32_t c = n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

void append_utf8(std::string& out, char32_t c);

// Number of characters in valid UTF-8 text.
size_t count_chars(std::string_view s);

// Whether `bytes` is well-formed UTF-8.
bool is_valid_utf8(std::string_view bytes);

// Replaces every maximal ill-formed subsequence by one U+FFFD (the Unicode "maximal subpart"
// practice that Rust's String::from_utf8_lossy and Python's errors="replace" follow).
std::string to_valid_utf8(std::string_view bytes);

// Length of the longest prefix of `bytes` after which a decoder is between characters: the
// rest, if any, is an incomplete sequence that more bytes could still complete.
size_t settled_utf8_prefix(std::string_view bytes);

// Length of the longest prefix of valid UTF-8 text `s` that is at most `n` bytes and ends on
// a character boundary.
size_t floor_char_boundary(std::string_view s, size_t n);

bool is_whitespace(char32_t c);   // Unicode White_Space (Rust char::is_whitespace)
bool is_word_char(char32_t c);    // \w of Rust's regex crate: Alphabetic, M, Nd, Pc, Join_Control
bool is_numeric(char32_t c);      // General category Nd, Nl or No (Rust char::is_numeric)
bool is_punctuation(char32_t c);  // ASCII punctuation or general category P*
bool is_other(char32_t c);        // General category C* (BERT's "control")
bool is_mark(char32_t c);         // General category M*
bool is_nonspacing_mark(char32_t c);  // General category Mn
bool is_cjk_ideograph(char32_t c);    // BERT's "chinese character" blocks

// Appends the full lowercase mapping of c (Rust char::to_lowercase).
void append_lowercase(std::string& out, char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// Unicode normalization of valid UTF-8 text (utf8proc).
std::string normalize_form(std::string_view s, NormalForm form);

}  // namespace tandem::tok
