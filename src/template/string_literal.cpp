#include "core/ascii.h"
#include "template/errors.h"
#include "template/lexer.h"
#include "template/unicode.h"

namespace tandem::jinja {

std::string decode_string_literal(const std::string& raw, int line) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 >= raw.size()) {
      out.push_back(raw[i]);
      continue;
    }
    char c = raw[++i];
    switch (c) {
      case '\n':
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t width = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        size_t j = 0;
        while (j < width && i + 1 + j < raw.size() && ascii_is_hex(raw[i + 1 + j])) ++j;
        if (j < width) raise_syntax(line, fmt::format("truncated \\{}XXXX escape", c));
        char32_t cp = static_cast<char32_t>(std::stoul(raw.substr(i + 1, width), nullptr, 16));
        if (cp > 0x10FFFF) raise_syntax(line, "illegal Unicode character");
        unicode::append(out, cp);
        i += width;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          char32_t cp = 0;
          size_t j = 0;
          while (j < 3 && i + j < raw.size() && raw[i + j] >= '0' && raw[i + j] <= '7')
            cp = cp * 8 + (raw[i + j++] - '0');
          unicode::append(out, cp);
          i += j - 1;
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace tandem::jinja
