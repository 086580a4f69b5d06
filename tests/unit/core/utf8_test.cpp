// core/utf8: the codec against Unicode's well-formedness table (Table 3-7) and its
// "maximal subpart" replacement rule, and the character database against facts of the
// Unicode standard (categories, the Lowercase/Uppercase properties, full case mappings).
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "core/utf8.h"

namespace tandem {
namespace utf8_test {

TEST(Utf8, EncodesAndDecodesEveryLengthAtItsBoundaries) {
  for (char32_t c : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    utf8::append(s, c);
    EXPECT_EQ(s.size(), utf8::char_len(static_cast<unsigned char>(s[0]))) << std::hex << uint32_t(c);
    EXPECT_TRUE(utf8::is_valid(s)) << std::hex << uint32_t(c);
    size_t i = 0;
    EXPECT_EQ(utf8::next_valid(s, i), c);
    EXPECT_EQ(i, s.size());
  }
  EXPECT_EQ(utf8::count_chars("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), 4u);  // a é € 😀
}

TEST(Utf8, RejectsOverlongsSurrogatesAndCodePointsPastTheLast) {
  for (std::string bad : {"\xC0\x80", "\xC1\xBF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xF0\x8F\xBF\xBF",
                          "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80", "\xFF"})
    EXPECT_FALSE(utf8::is_valid(bad)) << testing::PrintToString(bad);
  EXPECT_TRUE(utf8::is_valid("\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF"));  // U+D7FF, U+E000, U+10FFFF
}

TEST(Utf8, ReplacesEachMaximalSubpartOnce) {
  const std::string R(utf8::kReplacementUtf8);
  EXPECT_EQ(utf8::to_valid("a\xE2\x82z"), "a" + R + "z");          // a truncated 3-byte char
  EXPECT_EQ(utf8::to_valid("\xE0\x80"), R + R);                    // E0 must go on with A0..BF
  EXPECT_EQ(utf8::to_valid("\xF0\x9F\x98"), R);                    // one subpart, cut short
  EXPECT_EQ(utf8::to_valid("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(utf8::settled_prefix("ab\xF0\x9F\x98"), 2u);  // more bytes could complete it
  EXPECT_EQ(utf8::settled_prefix("ab\xF0\x41"), 4u);      // a bad byte: nothing to wait for
  EXPECT_EQ(utf8::floor_char_boundary("a\xC3\xA9", 2), 1u);
  const utf8::Sequence seq = utf8::scan("\xE2\x82", 0);
  EXPECT_FALSE(seq.valid);
  EXPECT_TRUE(seq.truncated);
  EXPECT_EQ(seq.length, 2u);
}

TEST(Utf8, CategoriesAndProperties) {
  using utf8::Category;
  EXPECT_EQ(utf8::category('A'), Category::Lu);
  EXPECT_EQ(utf8::category(0x4E2D), Category::Lo);   // 中
  EXPECT_EQ(utf8::category(0x0663), Category::Nd);   // Arabic-Indic three
  EXPECT_EQ(utf8::category(0x0301), Category::Mn);   // combining acute
  EXPECT_EQ(utf8::category(0x3000), Category::Zs);
  EXPECT_EQ(utf8::category(0x00AD), Category::Cf);   // soft hyphen
  EXPECT_EQ(utf8::category(0x0378), Category::Cn);   // unassigned
  EXPECT_TRUE(utf8::is_bidi_space(0x1F));            // a segment separator
  EXPECT_FALSE(utf8::is_bidi_space(0x200B));         // zero width space is not
  EXPECT_TRUE(utf8::is_lowercase(0x00DF));           // ß: Ll without an uppercase letter
  EXPECT_TRUE(utf8::is_lowercase(0x00AA));           // ª: Other_Lowercase
  EXPECT_TRUE(utf8::is_uppercase(0x2160));           // Ⅰ: Other_Uppercase
  EXPECT_FALSE(utf8::is_uppercase(0x01C5));          // ǅ is titlecase, neither
  EXPECT_FALSE(utf8::is_lowercase(0x01C5));
  EXPECT_TRUE(utf8::is_digit(0x00B2));               // ² is a digit, not a decimal
  EXPECT_TRUE(utf8::is_digit(0x0966));
  EXPECT_FALSE(utf8::is_digit(0x00BD));              // ½ is numeric, not a digit
}

TEST(Utf8, FullCaseMappingsExpand) {
  auto upper = [](std::u32string s) {
    std::string out;
    for (char32_t c : s) utf8::append_upper(out, c);
    return out;
  };
  EXPECT_EQ(upper(U"straße"), "STRASSE");
  EXPECT_EQ(upper(U"\uFB01n"), "FIN");                       // ﬁ ligature
  EXPECT_EQ(upper(U"\u0390"), "\xCE\x99\xCC\x88\xCC\x81");  // ΐ → Ϊ́
  EXPECT_EQ(upper(U"\u00E9\u03C9"), "\xC3\x89\xCE\xA9");    // é ω: simple mappings
  std::string lower;
  for (char32_t c : std::u32string_view(U"\u0130A")) utf8::append_lower(lower, c);
  EXPECT_EQ(lower, "i\xCC\x87" "a");                          // İ → i + combining dot
  EXPECT_EQ(utf8::to_upper(0x01C6), 0x01C4u);                // ǆ → Ǆ (simple)
  EXPECT_EQ(utf8::to_lower(0x0130), U'i');
}

TEST(Utf8, NormalizesAroundAsciiRuns) {
  EXPECT_EQ(utf8::normalize("e\xCC\x81t\xC3\xA9", utf8::NormalForm::NFC), "\xC3\xA9t\xC3\xA9");
  EXPECT_EQ(utf8::normalize("\xC3\xA9", utf8::NormalForm::NFD), "e\xCC\x81");
  EXPECT_EQ(utf8::normalize("\xEF\xAC\x81", utf8::NormalForm::NFKC), "fi");
}

}  // namespace utf8_test
}  // namespace tandem
