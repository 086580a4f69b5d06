// UTF-8 repair, regex class translation and split behaviors, against hand-derived facts
// (Unicode Table 3-7 / "maximal subpart" practice, HF's documented split examples).
#include <gtest/gtest.h>

#include "tokenizer/pattern.h"
#include "tokenizer/split_behavior.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace unicode_test {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8, RepairReplacesEachMaximalSubpart) {
  EXPECT_EQ(to_valid_utf8("abc"), "abc");
  EXPECT_EQ(to_valid_utf8("a\xFF"
                          "b"),
            "a" + R + "b");
  EXPECT_EQ(to_valid_utf8("\xE0\x80"), R + R);          // E0 needs A0..BF next
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98"), R);          // truncated: one subpart
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), R + R + R);  // surrogate: three
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), R + R);          // overlong lead
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
}

TEST(Utf8, SettledPrefixStopsBeforeAnIncompleteSequence) {
  EXPECT_EQ(settled_utf8_prefix("ab"), 2u);
  EXPECT_EQ(settled_utf8_prefix("a\xF0\x9F"), 1u);
  EXPECT_EQ(settled_utf8_prefix("a\xFF"), 2u);      // invalid for sure: settled
  EXPECT_EQ(settled_utf8_prefix("a\xE0\x80"), 3u);  // E0 80 can never complete
  EXPECT_EQ(settled_utf8_prefix("\xE6\x97"), 0u);
}

TEST(Utf8, ValidityAndCounting) {
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo"));
  EXPECT_FALSE(is_valid_utf8("h\xC3"));
  EXPECT_EQ(count_chars("h\xC3\xA9\xF0\x9F\x98\x80"), 3u);
  EXPECT_EQ(floor_char_boundary("\xC3\xA9x", 1), 0u);
  EXPECT_EQ(floor_char_boundary("\xC3\xA9x", 2), 2u);
}

TEST(UnicodeClasses, MatchRustDefinitions) {
  EXPECT_TRUE(is_whitespace(0x85));
  EXPECT_TRUE(is_whitespace(0x3000));
  EXPECT_FALSE(is_whitespace(0x200B));   // zero width space is not White_Space
  EXPECT_TRUE(is_numeric(0x2167));       // Ⅷ, Nl
  EXPECT_TRUE(is_numeric(0x2460));       // ①, No
  EXPECT_TRUE(is_punctuation('$'));      // ASCII punctuation includes symbols
  EXPECT_TRUE(is_punctuation(0x201C));   // “
  EXPECT_FALSE(is_punctuation(0x20AC));  // € is Sc
  EXPECT_TRUE(is_word_char(0x301));      // combining acute
  std::string lower;
  append_lowercase(lower, 0x130);  // İ -> i + combining dot above
  EXPECT_EQ(lower, "i\xCC\x87");
}

TEST(Regex, SpaceAndWordClassesFollowOniguruma) {
  std::vector<Span> m;
  Regex(R"(\s+)").find_all(
      "a\xC2\x85"
      "b",
      m);  // U+0085 NEXT LINE
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].begin, 1u);
  EXPECT_EQ(m[0].end, 3u);
  m.clear();
  Regex(R"(\w+)").find_all("e\xCC\x81x y", m);  // a mark inside a word
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].end, 4u);
  m.clear();
  Regex(R"([^\s\p{L}]+)")
      .find_all(
          "a\xC2\x85"
          "1",
          m);  // \s inside a class too
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].begin, 3u);
  EXPECT_EQ(translate_onig_classes(R"([]\s])"), "[]\\s\\x{85}]");
  EXPECT_THROW(Regex("(unclosed"), Error);
}

TEST(Regex, CaseInsensitiveGroupsAndLookahead) {
  std::vector<Span> m;
  Regex(R"((?i:'s|'ll)|\s+(?!\S))").find_all("I'LL go  x", m);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].begin, 1u);  // 'LL
  EXPECT_EQ(m[0].end, 4u);
  EXPECT_EQ(m[1].begin, 7u);  // the first of two spaces: the last one stays with "x"
  EXPECT_EQ(m[1].end, 8u);
}

std::vector<std::string> split_dash(SplitBehavior b) {
  std::string text = "the-final--countdown";
  std::vector<Segment> segments;
  char_segments(
      text, [](char32_t c) { return c == '-'; }, segments);
  std::vector<Span> spans;
  split_spans(segments, b, spans);
  std::vector<std::string> out;
  for (const Span& s : spans) out.push_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(SplitBehavior, HfDocumentedExamples) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_dash(SplitBehavior::Removed), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split_dash(SplitBehavior::Isolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_dash(SplitBehavior::MergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_dash(SplitBehavior::MergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_dash(SplitBehavior::Contiguous), (V{"the", "-", "final", "--", "countdown"}));
}

TEST(Pattern, LiteralAndRegexSegmentsCoverTheText) {
  std::vector<Segment> s;
  Pattern::literal("ab").find_segments("xabyab", s);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_FALSE(s[0].is_match);
  EXPECT_TRUE(s[1].is_match);
  EXPECT_EQ(s[3].end, 6u);
  s.clear();
  Pattern::literal("ab").find_segments("", s);
  ASSERT_EQ(s.size(), 1u);  // HF: one empty non-match
}

}  // namespace unicode_test
}  // namespace tandem::tok
