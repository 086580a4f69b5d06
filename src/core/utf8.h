// UTF-8 and the Unicode character database, for every module that handles text: the
// tokenizer's character classes follow Rust's definitions (tokenizer/unicode.h), the
// template's follow Python's str methods (template/unicode.h); both are built on this.
// General categories, bidirectional classes, simple case mappings and normalization come
// from utf8proc; the few properties utf8proc does not expose (Other_Lowercase,
// Other_Uppercase, Numeric_Type=Digit, SpecialCasing's expansions) are exact tables in
// utf8_properties.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// --- encoding and decoding (utf8.cpp) ---

// Appends the UTF-8 encoding of code point c (< 0x110000).
void append(std::string& out, char32_t c);

// Byte length of the character whose lead byte is `lead` (1 for a stray byte).
inline size_t char_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the character at s[i] of valid UTF-8 and advances i past it (a stray byte
// decodes to its own value).
inline char32_t next_valid(std::string_view s, size_t& i) {
  const unsigned char b0 = static_cast<unsigned char>(s[i]);
  const size_t n = char_len(b0);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b0;
  }
  char32_t c = n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

// The sequence at s[i] by the well-formedness rules (Unicode Table 3-7): a character of
// `length` bytes, or an ill-formed maximal subpart of `length` >= 1 bytes; `truncated`
// when the subpart was cut short by the end of the input rather than by a bad byte.
struct Sequence {
  size_t length = 1;
  bool valid = false;
  bool truncated = false;
};
Sequence scan(std::string_view s, size_t i);

// Characters in valid UTF-8 text.
size_t count_chars(std::string_view s);
// Whether `bytes` is well-formed UTF-8.
bool is_valid(std::string_view bytes);
// Every maximal ill-formed subsequence replaced by one U+FFFD (the Unicode "maximal
// subpart" practice of Rust's String::from_utf8_lossy and Python's errors="replace").
std::string to_valid(std::string_view bytes);
// Length of the longest prefix after which a decoder is between characters: the rest, if
// any, is an incomplete sequence that more bytes could still complete.
size_t settled_prefix(std::string_view bytes);
// Length of the longest prefix of valid UTF-8 `s` that is at most `n` bytes and ends on a
// character boundary.
size_t floor_char_boundary(std::string_view s, size_t n);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// Unicode normalization of valid UTF-8 text.
std::string normalize(std::string_view s, NormalForm form);

// --- the character database (utf8_properties.cpp) ---

// General categories, in utf8proc's order (Cn: unassigned).
enum class Category : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po,
  Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co,
};
Category category(char32_t c);
inline bool is_letter(Category k) { return k >= Category::Lu && k <= Category::Lo; }
inline bool is_mark(Category k) { return k >= Category::Mn && k <= Category::Me; }
inline bool is_number(Category k) { return k >= Category::Nd && k <= Category::No; }
inline bool is_punctuation(Category k) { return k >= Category::Pc && k <= Category::Po; }
inline bool is_other(Category k) { return k == Category::Cn || k >= Category::Cc; }

// Bidirectional class WS, B or S (whitespace, paragraph or segment separator).
bool is_bidi_space(char32_t c);
// The Lowercase / Uppercase properties: category Ll / Lu, or Other_Lowercase /
// Other_Uppercase (ª, ⅰ, ⓐ; Ⅰ, Ⓐ).
bool is_lowercase(char32_t c);
bool is_uppercase(char32_t c);
// Numeric_Type Digit or Decimal: Nd and the superscript, circled and other digits.
bool is_digit(char32_t c);

// Simple (one-to-one) case mappings of UnicodeData.txt.
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
// Full case mappings (SpecialCasing.txt's unconditional ones, else the simple one):
// ß → SS, ﬁ → FI, İ → i̇.
void append_upper(std::string& out, char32_t c);
void append_lower(std::string& out, char32_t c);

}  // namespace tandem::utf8
