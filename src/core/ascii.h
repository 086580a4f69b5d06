// ASCII case folding for protocol text (header names, URL schemes, hosts, media types):
// only A-Z change, so UTF-8 passes through intact and no locale is consulted.
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

}  // namespace tandem
