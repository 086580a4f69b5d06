#include "grammar_test_support.h"

namespace tandem::grammar::test {
namespace smoke_test {

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

}  // namespace smoke_test
}  // namespace tandem::grammar::test

namespace tandem::grammar::test {
namespace smoke_test {

// A call in tail position is a jump, so right recursion keeps a constant stack: reading
// 2,000 characters visits a handful of automaton states, not one per character.
TEST(GrammarProgram, RightRecursionRunsInConstantStack) {
  auto g = compiled(GrammarSpec::gbnf(
      "root ::= item root | \"end\"\nitem ::= \"a\" | \"b\" ws\nws ::= | \" \" ws\n"));
  Matcher m(g);
  std::string text;
  for (int i = 0; i < 1000; ++i) text += i % 3 ? "a" : "b  ";
  ASSERT_TRUE(m.accept_bytes(text));
  ASSERT_TRUE(m.accept_bytes("end"));
  EXPECT_TRUE(m.must_end());
  EXPECT_LT(g->stats().num_states, 40u);
}

// A matcher copies by value: two copies advance independently.
TEST(GrammarMatcher, CopiesForkIndependently) {
  Matcher a(compiled(GrammarSpec::choice({"cat", "car", "cart"})));
  ASSERT_TRUE(a.accept_bytes("ca"));
  Matcher b = a;
  EXPECT_TRUE(a.accept_bytes("t"));
  EXPECT_TRUE(a.must_end());
  EXPECT_TRUE(b.accept_bytes("r"));
  EXPECT_TRUE(b.can_end());
  EXPECT_FALSE(b.must_end());
  EXPECT_FALSE(b.accept_bytes("x"));  // refused: b stays where it was
  EXPECT_TRUE(b.accept_bytes("t"));
  EXPECT_TRUE(b.must_end());
}

}  // namespace smoke_test
}  // namespace tandem::grammar::test
