// The parts of the Unicode character database the text modules use: utf8proc's, and
// four exact tables utf8proc does not carry. The tables were generated from Python 3.11's
// unicodedata (Unicode 14.0), the definition the template's str methods must match:
//   Numeric_Type=Digit without Nd:  unicodedata.digit(c) defined, .decimal(c) not;
//   Other_Lowercase / Other_Uppercase:  c.islower() / c.isupper() outside Ll / Lu;
//   uppercase expansions:  len(c.upper()) > 1.
#include <utf8proc.h>

#include <algorithm>
#include <iterator>

#include "core/utf8.h"

namespace tandem::utf8 {
namespace {

static_assert(int(Category::Lu) == UTF8PROC_CATEGORY_LU && int(Category::Nd) == UTF8PROC_CATEGORY_ND &&
              int(Category::Zs) == UTF8PROC_CATEGORY_ZS && int(Category::Co) == UTF8PROC_CATEGORY_CO);

struct Range {
  char32_t lo, hi;
};

struct Expansion {
  char32_t c;
  const char* upper;  // UTF-8
};

// Numeric_Type=Digit outside Nd (superscripts, circled digits, ...): str.isdigit but not isdecimal.
constexpr Range kDigitNotDecimal[] = {
    {0xB2, 0xB3}, {0xB9, 0xB9}, {0x1369, 0x1371}, {0x19DA, 0x19DA},
    {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468},
    {0x2474, 0x247C}, {0x2488, 0x2490}, {0x24EA, 0x24EA}, {0x24F5, 0x24FD},
    {0x24FF, 0x24FF}, {0x2776, 0x277E}, {0x2780, 0x2788}, {0x278A, 0x2792},
    {0x10A40, 0x10A43}, {0x10E60, 0x10E68}, {0x11052, 0x1105A}, {0x1F100, 0x1F10A},
};
// Other_Lowercase (PropList.txt): lowercase without category Ll.
constexpr Range kOtherLowercase[] = {
    {0xAA, 0xAA}, {0xBA, 0xBA}, {0x2B0, 0x2B8}, {0x2C0, 0x2C1},
    {0x2E0, 0x2E4}, {0x345, 0x345}, {0x37A, 0x37A}, {0x1D2C, 0x1D6A},
    {0x1D78, 0x1D78}, {0x1D9B, 0x1DBF}, {0x2071, 0x2071}, {0x207F, 0x207F},
    {0x2090, 0x209C}, {0x2170, 0x217F}, {0x24D0, 0x24E9}, {0x2C7C, 0x2C7D},
    {0xA69C, 0xA69D}, {0xA770, 0xA770}, {0xA7F8, 0xA7F9}, {0xAB5C, 0xAB5F},
    {0x10780, 0x10780}, {0x10783, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA},
};
// Other_Uppercase (PropList.txt): uppercase without category Lu.
constexpr Range kOtherUppercase[] = {
    {0x2160, 0x216F}, {0x24B6, 0x24CF}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169},
    {0x1F170, 0x1F189},
};
// SpecialCasing.txt's unconditional uppercase mappings of more than one character.
constexpr Expansion kUpperExpansions[] = {
    {0xDF, "\x53\x53"}, {0x149, "\xCA\xBC\x4E"}, {0x1F0, "\x4A\xCC\x8C"},
    {0x390, "\xCE\x99\xCC\x88\xCC\x81"}, {0x3B0, "\xCE\xA5\xCC\x88\xCC\x81"},
    {0x587, "\xD4\xB5\xD5\x92"}, {0x1E96, "\x48\xCC\xB1"}, {0x1E97, "\x54\xCC\x88"},
    {0x1E98, "\x57\xCC\x8A"}, {0x1E99, "\x59\xCC\x8A"}, {0x1E9A, "\x41\xCA\xBE"},
    {0x1F50, "\xCE\xA5\xCC\x93"}, {0x1F52, "\xCE\xA5\xCC\x93\xCC\x80"},
    {0x1F54, "\xCE\xA5\xCC\x93\xCC\x81"}, {0x1F56, "\xCE\xA5\xCC\x93\xCD\x82"},
    {0x1F80, "\xE1\xBC\x88\xCE\x99"}, {0x1F81, "\xE1\xBC\x89\xCE\x99"},
    {0x1F82, "\xE1\xBC\x8A\xCE\x99"}, {0x1F83, "\xE1\xBC\x8B\xCE\x99"},
    {0x1F84, "\xE1\xBC\x8C\xCE\x99"}, {0x1F85, "\xE1\xBC\x8D\xCE\x99"},
    {0x1F86, "\xE1\xBC\x8E\xCE\x99"}, {0x1F87, "\xE1\xBC\x8F\xCE\x99"},
    {0x1F88, "\xE1\xBC\x88\xCE\x99"}, {0x1F89, "\xE1\xBC\x89\xCE\x99"},
    {0x1F8A, "\xE1\xBC\x8A\xCE\x99"}, {0x1F8B, "\xE1\xBC\x8B\xCE\x99"},
    {0x1F8C, "\xE1\xBC\x8C\xCE\x99"}, {0x1F8D, "\xE1\xBC\x8D\xCE\x99"},
    {0x1F8E, "\xE1\xBC\x8E\xCE\x99"}, {0x1F8F, "\xE1\xBC\x8F\xCE\x99"},
    {0x1F90, "\xE1\xBC\xA8\xCE\x99"}, {0x1F91, "\xE1\xBC\xA9\xCE\x99"},
    {0x1F92, "\xE1\xBC\xAA\xCE\x99"}, {0x1F93, "\xE1\xBC\xAB\xCE\x99"},
    {0x1F94, "\xE1\xBC\xAC\xCE\x99"}, {0x1F95, "\xE1\xBC\xAD\xCE\x99"},
    {0x1F96, "\xE1\xBC\xAE\xCE\x99"}, {0x1F97, "\xE1\xBC\xAF\xCE\x99"},
    {0x1F98, "\xE1\xBC\xA8\xCE\x99"}, {0x1F99, "\xE1\xBC\xA9\xCE\x99"},
    {0x1F9A, "\xE1\xBC\xAA\xCE\x99"}, {0x1F9B, "\xE1\xBC\xAB\xCE\x99"},
    {0x1F9C, "\xE1\xBC\xAC\xCE\x99"}, {0x1F9D, "\xE1\xBC\xAD\xCE\x99"},
    {0x1F9E, "\xE1\xBC\xAE\xCE\x99"}, {0x1F9F, "\xE1\xBC\xAF\xCE\x99"},
    {0x1FA0, "\xE1\xBD\xA8\xCE\x99"}, {0x1FA1, "\xE1\xBD\xA9\xCE\x99"},
    {0x1FA2, "\xE1\xBD\xAA\xCE\x99"}, {0x1FA3, "\xE1\xBD\xAB\xCE\x99"},
    {0x1FA4, "\xE1\xBD\xAC\xCE\x99"}, {0x1FA5, "\xE1\xBD\xAD\xCE\x99"},
    {0x1FA6, "\xE1\xBD\xAE\xCE\x99"}, {0x1FA7, "\xE1\xBD\xAF\xCE\x99"},
    {0x1FA8, "\xE1\xBD\xA8\xCE\x99"}, {0x1FA9, "\xE1\xBD\xA9\xCE\x99"},
    {0x1FAA, "\xE1\xBD\xAA\xCE\x99"}, {0x1FAB, "\xE1\xBD\xAB\xCE\x99"},
    {0x1FAC, "\xE1\xBD\xAC\xCE\x99"}, {0x1FAD, "\xE1\xBD\xAD\xCE\x99"},
    {0x1FAE, "\xE1\xBD\xAE\xCE\x99"}, {0x1FAF, "\xE1\xBD\xAF\xCE\x99"},
    {0x1FB2, "\xE1\xBE\xBA\xCE\x99"}, {0x1FB3, "\xCE\x91\xCE\x99"}, {0x1FB4, "\xCE\x86\xCE\x99"},
    {0x1FB6, "\xCE\x91\xCD\x82"}, {0x1FB7, "\xCE\x91\xCD\x82\xCE\x99"},
    {0x1FBC, "\xCE\x91\xCE\x99"}, {0x1FC2, "\xE1\xBF\x8A\xCE\x99"}, {0x1FC3, "\xCE\x97\xCE\x99"},
    {0x1FC4, "\xCE\x89\xCE\x99"}, {0x1FC6, "\xCE\x97\xCD\x82"},
    {0x1FC7, "\xCE\x97\xCD\x82\xCE\x99"}, {0x1FCC, "\xCE\x97\xCE\x99"},
    {0x1FD2, "\xCE\x99\xCC\x88\xCC\x80"}, {0x1FD3, "\xCE\x99\xCC\x88\xCC\x81"},
    {0x1FD6, "\xCE\x99\xCD\x82"}, {0x1FD7, "\xCE\x99\xCC\x88\xCD\x82"},
    {0x1FE2, "\xCE\xA5\xCC\x88\xCC\x80"}, {0x1FE3, "\xCE\xA5\xCC\x88\xCC\x81"},
    {0x1FE4, "\xCE\xA1\xCC\x93"}, {0x1FE6, "\xCE\xA5\xCD\x82"},
    {0x1FE7, "\xCE\xA5\xCC\x88\xCD\x82"}, {0x1FF2, "\xE1\xBF\xBA\xCE\x99"},
    {0x1FF3, "\xCE\xA9\xCE\x99"}, {0x1FF4, "\xCE\x8F\xCE\x99"}, {0x1FF6, "\xCE\xA9\xCD\x82"},
    {0x1FF7, "\xCE\xA9\xCD\x82\xCE\x99"}, {0x1FFC, "\xCE\xA9\xCE\x99"}, {0xFB00, "\x46\x46"},
    {0xFB01, "\x46\x49"}, {0xFB02, "\x46\x4C"}, {0xFB03, "\x46\x46\x49"}, {0xFB04, "\x46\x46\x4C"},
    {0xFB05, "\x53\x54"}, {0xFB06, "\x53\x54"}, {0xFB13, "\xD5\x84\xD5\x86"},
    {0xFB14, "\xD5\x84\xD4\xB5"}, {0xFB15, "\xD5\x84\xD4\xBB"}, {0xFB16, "\xD5\x8E\xD5\x86"},
    {0xFB17, "\xD5\x84\xD4\xBD"},
};

template <size_t N>
bool in_ranges(char32_t c, const Range (&ranges)[N]) {
  for (const Range& r : ranges)
    if (c >= r.lo && c <= r.hi) return true;
  return false;
}

const utf8proc_property_t* property(char32_t c) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
}

}  // namespace

Category category(char32_t c) {
  return static_cast<Category>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

bool is_bidi_space(char32_t c) {
  const int bidi = property(c)->bidi_class;
  return bidi == UTF8PROC_BIDI_CLASS_WS || bidi == UTF8PROC_BIDI_CLASS_B ||
         bidi == UTF8PROC_BIDI_CLASS_S;
}

bool is_lowercase(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return category(c) == Category::Ll || in_ranges(c, kOtherLowercase);
}

bool is_uppercase(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  return category(c) == Category::Lu || in_ranges(c, kOtherUppercase);
}

bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return category(c) == Category::Nd || in_ranges(c, kDigitNotDecimal);
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

void append_upper(std::string& out, char32_t c) {
  if (c >= 0xDF) {  // the table is sorted by code point
    const Expansion* e = std::lower_bound(std::begin(kUpperExpansions), std::end(kUpperExpansions), c,
                                          [](const Expansion& x, char32_t v) { return x.c < v; });
    if (e != std::end(kUpperExpansions) && e->c == c) {
      out += e->upper;
      return;
    }
  }
  append(out, to_upper(c));
}

void append_lower(std::string& out, char32_t c) {
  if (c == 0x130) {  // the one unconditional multi-character lowercase mapping
    out += "i\xCC\x87";
    return;
  }
  append(out, to_lower(c));
}

}  // namespace tandem::utf8
