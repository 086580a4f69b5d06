// The regex and GBNF case tables, and the refusals (cases/schema_errors.json and inline
// GBNF/regex errors): each error must name the path and keyword the server will report.
#include <fstream>
#include <regex>

#include "grammar/grammar_error.h"
#include "grammar_test_support.h"

namespace tandem::grammar::test {
namespace text_cases_test {

Json load(const char* file) {
  std::ifstream in(cases_dir() / file);
  EXPECT_TRUE(in.good()) << (cases_dir() / file);
  return Json::parse(in);
}

bool ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; });
}

TEST(RegexCases, MatchWholeAndAgreeWithStdRegex) {
  Json cases = load("regex_cases.json");
  ASSERT_GE(cases.size(), 20u);
  for (const Json& c : cases) {
    std::string pattern = c["pattern"];
    SCOPED_TRACE(pattern);
    GrammarSpec spec = GrammarSpec::regex(pattern);
    std::optional<std::regex> reference;
    if (ascii(pattern)) {
      try {
        reference.emplace(pattern, std::regex::ECMAScript);
      } catch (const std::regex_error&) {  // libstdc++ lacks some ECMAScript syntax
      }
    }
    for (const Json& t : c["accept"]) {
      std::string text = t;
      EXPECT_TRUE(accepts(spec, text)) << text;
      if (reference && ascii(text)) {
        EXPECT_TRUE(std::regex_match(text, *reference)) << text;
      }
    }
    for (const Json& t : c["reject"]) {
      std::string text = t;
      EXPECT_FALSE(accepts(spec, text)) << text;
      if (reference && ascii(text)) {
        EXPECT_FALSE(std::regex_match(text, *reference)) << text;
      }
    }
  }
}

TEST(GbnfCases, AcceptAndReject) {
  Json cases = load("gbnf_cases.json");
  ASSERT_GE(cases.size(), 10u);
  for (const Json& c : cases) {
    SCOPED_TRACE(c["grammar"].get<std::string>());
    GrammarSpec spec = GrammarSpec::gbnf(c["grammar"]);
    for (const Json& t : c["accept"]) EXPECT_TRUE(accepts(spec, t.get<std::string>())) << t;
    for (const Json& t : c["reject"]) EXPECT_FALSE(accepts(spec, t.get<std::string>())) << t;
  }
}

// The error a spec raises (or a failure when it compiles).
std::optional<GrammarError> error_of(const GrammarSpec& spec) {
  try {
    compile_program(spec);
  } catch (const GrammarError& e) {
    return e;
  }
  return std::nullopt;
}

TEST(SchemaErrors, NameThePathAndKeyword) {
  Json cases = load("schema_errors.json");
  ASSERT_GE(cases.size(), 40u);
  for (const Json& c : cases) {
    SCOPED_TRACE(c["schema"].dump());
    std::optional<GrammarError> e = error_of(GrammarSpec::json_schema(c["schema"]));
    ASSERT_TRUE(e) << "compiled without an error";
    EXPECT_EQ(e->path(), c["path"].get<std::string>()) << e->what();
    EXPECT_EQ(e->keyword(), c["keyword"].get<std::string>()) << e->what();
    EXPECT_FALSE(e->message().empty());
  }
}

TEST(GbnfErrors, NameTheLineAndColumn) {
  struct Case {
    const char* text;
    const char* path;
    const char* message_part;
  } cases[] = {
      {"root ::= \"a\n", "line 1, column 10", "unterminated string"},
      {"root ::= [a-\n", "line 1, column 10", "unterminated character class"},
      {"root ::= item\n", "line 1, column 10", "never defined"},
      {"item ::= \"x\"\n", "line 1, column 1", "no 'root'"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1", "defined twice"},
      {"root ::= (\"a\"\n", "line 1, column 10", "unterminated '('"},
      {"root ::= \"a\" )\n", "line 1, column 14", "end of the line"},
      {"root ::= <think>\n", "line 1, column 10", "token references"},
      {"root ::= \"\\q\"\n", "line 1, column 11", "unknown escape"},
      {"root ::= \"a\"{3,1}\n", "line 1, column 13", "out of order"},
      {"root := \"a\"\n", "line 1, column 6", "'::='"},
      {"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n", "expr", "left-recursive"},
      {"root ::= \"a\" root\n", "root", "never be completed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::optional<GrammarError> e = error_of(GrammarSpec::gbnf(c.text));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->path(), c.path) << e->what();
    EXPECT_NE(e->message().find(c.message_part), std::string::npos) << e->what();
  }
}

TEST(SpecErrors, RegexAndChoices) {
  std::optional<GrammarError> e = error_of(GrammarSpec::regex("a(b"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->keyword(), "regex");
  EXPECT_NE(e->message().find("character 1"), std::string::npos) << e->what();
  e = error_of(GrammarSpec::choice({}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->keyword(), "choice");
  EXPECT_FALSE(error_of(GrammarSpec::choice({"", "a"})));
}

}  // namespace text_cases_test
}  // namespace tandem::grammar::test
