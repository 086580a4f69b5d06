// UTF-8 <-> code points and the character classes Python's str methods rely on.
// Python strings index by code point, so every index/length/slice goes through here.
// Invalid UTF-8 bytes decode to U+DC80..U+DCFF (Python's surrogateescape) and encode back
// to the same byte, so no input is ever altered by a round trip.
// Character classes and case mappings follow CPython's definitions over the Unicode
// database (core/utf8.h); to_upper/to_lower are the simple one-to-one mappings, upper()
// and lower() the full ones.
#pragma once

#include <string>
#include <string_view>

namespace tandem::jinja::unicode {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append(std::string& out, char32_t c);
// Decodes one code point at s[pos], advancing pos.
char32_t next(std::string_view s, size_t& pos);

bool is_ascii(std::string_view s);
size_t length(std::string_view s);  // in code points

bool is_space(char32_t c);      // str.isspace / regex \s
bool is_linebreak(char32_t c);  // str.splitlines boundaries
bool is_digit(char32_t c);      // str.isdigit
bool is_alpha(char32_t c);      // str.isalpha
bool is_alnum(char32_t c);
bool is_word(char32_t c);       // regex \w
bool is_printable(char32_t c);  // repr() keeps it as-is
bool is_upper(char32_t c);
bool is_lower(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);

std::string upper(std::string_view s);  // str.upper (ß -> SS)
std::string lower(std::string_view s);

}  // namespace tandem::jinja::unicode
