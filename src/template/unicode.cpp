#include "template/unicode.h"

namespace tandem::jinja::unicode {
namespace {

struct Range {
  char32_t lo, hi;
};

template <size_t N>
bool in_ranges(char32_t c, const Range (&ranges)[N]) {
  for (const Range& r : ranges)
    if (c >= r.lo && c <= r.hi) return true;
  return false;
}

// Letters (categories L*) outside ASCII, coarse but covering the common scripts.
constexpr Range kAlpha[] = {
    {0xAA, 0xAA},     {0xB5, 0xB5},     {0xBA, 0xBA},     {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x2C1},    {0x2C6, 0x2D1},   {0x370, 0x374},   {0x376, 0x37D},     {0x37F, 0x37F},
    {0x386, 0x386},   {0x388, 0x3FF},   {0x400, 0x481},   {0x48A, 0x52F},     {0x531, 0x556},
    {0x561, 0x587},   {0x5D0, 0x5EA},   {0x620, 0x64A},   {0x671, 0x6D3},     {0x904, 0x939},
    {0x958, 0x961},   {0xE01, 0xE30},   {0x10A0, 0x10FF}, {0x1100, 0x11FF},   {0x1E00, 0x1FBC},
    {0x2C00, 0x2CE4}, {0x3041, 0x3096}, {0x30A1, 0x30FA}, {0x3105, 0x312F},   {0x3131, 0x318E},
    {0x3400, 0x4DBF}, {0x4E00, 0x9FFF}, {0xA000, 0xA48C}, {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0xFF66, 0xFF9D}, {0x20000, 0x2FFFF},
};

// Decimal digits of other scripts (str.isdigit is true for these and for superscripts).
constexpr Range kDigit[] = {
    {0xB2, 0xB3},     {0xB9, 0xB9},     {0x660, 0x669},   {0x6F0, 0x6F9},
    {0x966, 0x96F},   {0x9E6, 0x9EF},   {0xE50, 0xE59},   {0x2070, 0x2070},
    {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468}, {0xFF10, 0xFF19},
};

constexpr Range kSpace[] = {
    {0x09, 0x0D},     {0x1C, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

// Not printable for repr(): controls, separators other than ' ', format chars,
// surrogates, private use, non-characters.
constexpr Range kUnprintable[] = {
    {0x00, 0x1F},     {0x7F, 0xA0},     {0xAD, 0xAD},     {0x600, 0x605},     {0x61C, 0x61C},
    {0x6DD, 0x6DD},   {0x70F, 0x70F},   {0x180E, 0x180E}, {0x1680, 0x1680},   {0x2000, 0x200F},
    {0x2028, 0x202F}, {0x205F, 0x2064}, {0x2066, 0x206F}, {0x3000, 0x3000},   {0xD800, 0xF8FF},
    {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}, {0xFFFE, 0xFFFF}, {0xE0000, 0xE007F}, {0xF0000, 0x10FFFF},
};

// Case pairs laid out as alternating upper/lower code points in [lo, hi].
constexpr Range kAlternatingEvenUpper[] = {
    {0x100, 0x12F}, {0x132, 0x137}, {0x14A, 0x177},   {0x182, 0x185},   {0x1A0, 0x1A5},
    {0x1DE, 0x1EF}, {0x1F8, 0x21F}, {0x222, 0x233},   {0x3D8, 0x3EF},   {0x460, 0x481},
    {0x48A, 0x4BF}, {0x4D0, 0x52F}, {0x1E00, 0x1E95}, {0x1EA0, 0x1EFF},
};
constexpr Range kAlternatingOddUpper[] = {
    {0x139, 0x148},
    {0x179, 0x17E},
    {0x4C1, 0x4CE},
};

// Fixed-offset blocks: [lo, hi] upper maps to lower by +delta.
struct Shift {
  char32_t lo, hi;
  int delta;
};
constexpr Shift kShifts[] = {
    {'A', 'Z', 32},     {0xC0, 0xD6, 32},   {0xD8, 0xDE, 32},       {0x391, 0x3A1, 32},
    {0x3A3, 0x3AB, 32}, {0x388, 0x38A, 37}, {0x38E, 0x38F, 63},     {0x410, 0x42F, 32},
    {0x400, 0x40F, 80}, {0x531, 0x556, 48}, {0x10A0, 0x10C5, 7264}, {0xFF21, 0xFF3A, 32},
};

}  // namespace

void append(std::string& out, char32_t c) {
  if (c >= 0xDC80 && c <= 0xDCFF) {  // an escaped invalid byte
    out.push_back(static_cast<char>(c - 0xDC00));
  } else if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

char32_t next(std::string_view s, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b0 = byte(pos);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  int len = b0 >= 0xF0 && b0 < 0xF5 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (len == 0 || pos + len > s.size()) {
    ++pos;
    return 0xDC00 + b0;
  }
  char32_t c = b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    unsigned char b = byte(pos + k);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return 0xDC00 + b0;
    }
    c = (c << 6) | (b & 0x3F);
  }
  pos += len;
  return c;
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out.push_back(next(s, pos));
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) next(s, pos);
  return n;
}

bool is_space(char32_t c) {
  return in_ranges(c, kSpace);
}

bool is_linebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_digit(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 0x80 && in_ranges(c, kDigit));
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return in_ranges(c, kAlpha);
}

bool is_alnum(char32_t c) {
  return is_alpha(c) || is_digit(c);
}
bool is_word(char32_t c) {
  return is_alnum(c) || c == '_';
}

bool is_printable(char32_t c) {
  if (c >= 0x20 && c < 0x7F) return true;
  return !in_ranges(c, kUnprintable);
}

// The Latin digraph triples (DŽ, Dž, dž), (LJ, Lj, lj), (NJ, Nj, nj), (DZ, Dz, dz).
static int digraph_slot(char32_t c) {
  if (c >= 0x1C4 && c <= 0x1CC) return static_cast<int>((c - 0x1C4) % 3);
  if (c >= 0x1F1 && c <= 0x1F3) return static_cast<int>(c - 0x1F1);
  return -1;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (int slot = digraph_slot(c); slot >= 0) return c + (2 - slot);
  for (const Shift& s : kShifts)
    if (c >= s.lo && c <= s.hi) return c + s.delta;
  for (const Range& r : kAlternatingEvenUpper)
    if (c >= r.lo && c <= r.hi) return (c - r.lo) % 2 == 0 ? c + 1 : c;
  for (const Range& r : kAlternatingOddUpper)
    if (c >= r.lo && c <= r.hi) return (c - r.lo) % 2 == 0 ? c + 1 : c;
  if (c == 0x178) return 0xFF;
  if (c == 0x386) return 0x3AC;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x130) return 'i';
  return c;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (int slot = digraph_slot(c); slot >= 0) return c - slot;
  for (const Shift& s : kShifts)
    if (c >= s.lo + s.delta && c <= s.hi + s.delta) return c - s.delta;
  for (const Range& r : kAlternatingEvenUpper)
    if (c >= r.lo && c <= r.hi) return (c - r.lo) % 2 == 1 ? c - 1 : c;
  for (const Range& r : kAlternatingOddUpper)
    if (c >= r.lo && c <= r.hi) return (c - r.lo) % 2 == 1 ? c - 1 : c;
  switch (c) {
    case 0xFF:
      return 0x178;
    case 0xB5:
      return 0x39C;
    case 0x3C2:
      return 0x3A3;
    case 0x3AC:
      return 0x386;
    case 0x3CC:
      return 0x38C;
    case 0x131:
      return 'I';
    case 0x17F:
      return 'S';
    default:
      return c;
  }
}

bool is_upper(char32_t c) {
  return to_lower(c) != c;
}
bool is_lower(char32_t c) {
  return to_upper(c) != c || c == 0xDF;
}

// Upper-case mappings that expand to several characters (SpecialCasing.txt).
static const char* upper_expansion(char32_t c) {
  switch (c) {
    case 0xDF:
      return "SS";
    case 0x149:
      return "\u02BCN";
    case 0xFB00:
      return "FF";
    case 0xFB01:
      return "FI";
    case 0xFB02:
      return "FL";
    case 0xFB03:
      return "FFI";
    case 0xFB04:
      return "FFL";
    case 0xFB05:
    case 0xFB06:
      return "ST";
    default:
      return nullptr;
  }
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = next(s, pos);
    if (const char* e = upper_expansion(c)) {
      out += e;
    } else {
      append(out, to_upper(c));
    }
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    char32_t c = next(s, pos);
    if (c == 0x130) {
      out += "i\u0307";  // İ lowers to i + combining dot
    } else {
      append(out, to_lower(c));
    }
  }
  return out;
}

}  // namespace tandem::jinja::unicode
