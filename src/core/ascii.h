// ASCII helpers for protocol and template text (header names, URL schemes, hosts, media
// types, escapes, JSON whitespace): only ASCII bytes match, so UTF-8 passes through intact
// and no locale is consulted.
#pragma once

#include <string>
#include <string_view>

namespace tandem {

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

// JSON's whitespace (and HTTP's, with \r\n): space, tab, CR, LF.
inline bool ascii_is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

inline bool ascii_is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace tandem
