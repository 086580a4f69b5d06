#include "grammar_test_support.h"

namespace tandem::grammar::test {
namespace {

TEST(GrammarSmoke, ChoicesRegexGbnfSchema) {
  GrammarSpec c = GrammarSpec::choice({"yes", "no", "maybe"});
  EXPECT_TRUE(accepts(c, "yes"));
  EXPECT_TRUE(accepts(c, "maybe"));
  EXPECT_FALSE(accepts(c, "ye"));
  EXPECT_FALSE(accepts(c, "yess"));
  GrammarSpec r = GrammarSpec::regex("[a-c]+x{2,3}");
  EXPECT_TRUE(accepts(r, "abcxx"));
  EXPECT_TRUE(accepts(r, "axxx"));
  EXPECT_FALSE(accepts(r, "axxxx"));
  EXPECT_FALSE(accepts(r, "xx"));
  GrammarSpec g = GrammarSpec::gbnf("root ::= \"(\" root \")\" | \"x\"\n");
  EXPECT_TRUE(accepts(g, "x"));
  EXPECT_TRUE(accepts(g, "((x))"));
  EXPECT_FALSE(accepts(g, "((x)"));
  GrammarSpec s = schema_spec(
      R"({"type":"object","properties":{"a":{"type":"integer","minimum":3,"maximum":120}},"required":["a"]})");
  EXPECT_TRUE(accepts(s, R"({"a":3})"));
  EXPECT_TRUE(accepts(s, R"({"a":120})"));
  EXPECT_TRUE(accepts(s, R"({"a":99})"));
  EXPECT_FALSE(accepts(s, R"({"a":2})"));
  EXPECT_FALSE(accepts(s, R"({"a":121})"));
  EXPECT_FALSE(accepts(s, R"({"a":03})"));
  EXPECT_FALSE(accepts(s, R"({})"));
}

}  // namespace
}  // namespace tandem::grammar::test
