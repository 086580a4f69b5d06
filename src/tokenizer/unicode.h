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

#include "core/utf8.h"

namespace tandem::tok {

inline constexpr char32_t kReplacementChar = utf8::kReplacement;
inline constexpr std::string_view kReplacementUtf8 = utf8::kReplacementUtf8;

// The codec and validity rules are core/utf8.h's, under the names the tokenizer uses.
inline size_t utf8_char_len(unsigned char lead) { return utf8::char_len(lead); }
// Decodes the character at s[i] (valid UTF-8) and advances i past it.
inline char32_t next_char(std::string_view s, size_t& i) { return utf8::next_valid(s, i); }
inline void append_utf8(std::string& out, char32_t c) { utf8::append(out, c); }
inline size_t count_chars(std::string_view s) { return utf8::count_chars(s); }
inline bool is_valid_utf8(std::string_view bytes) { return utf8::is_valid(bytes); }
inline std::string to_valid_utf8(std::string_view bytes) { return utf8::to_valid(bytes); }
inline size_t settled_utf8_prefix(std::string_view bytes) { return utf8::settled_prefix(bytes); }
inline size_t floor_char_boundary(std::string_view s, size_t n) {
  return utf8::floor_char_boundary(s, n);
}

bool is_whitespace(char32_t c);   // Unicode White_Space (Rust char::is_whitespace)
bool is_word_char(char32_t c);    // \w of Rust's regex crate: Alphabetic, M, Nd, Pc, Join_Control
bool is_numeric(char32_t c);      // General category Nd, Nl or No (Rust char::is_numeric)
bool is_punctuation(char32_t c);  // ASCII punctuation or general category P*
bool is_other(char32_t c);        // General category C* (BERT's "control")
bool is_mark(char32_t c);         // General category M*
bool is_nonspacing_mark(char32_t c);  // General category Mn
bool is_cjk_ideograph(char32_t c);    // BERT's "chinese character" blocks

// Appends the full lowercase mapping of c (Rust char::to_lowercase).
inline void append_lowercase(std::string& out, char32_t c) { utf8::append_lower(out, c); }

using utf8::NormalForm;
// Unicode normalization of valid UTF-8 text (utf8proc).
inline std::string normalize_form(std::string_view s, NormalForm form) {
  return utf8::normalize(s, form);
}

}  // namespace tandem::tok
