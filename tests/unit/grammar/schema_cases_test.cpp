// The schema case tables (cases/schema_cases.json): every verdict of the grammar, and the
// same verdict from the independent checker, so a wrong table entry fails too.
#include <fstream>

#include "grammar_test_support.h"
#include "schema_checker.h"

namespace tandem::grammar::test {
namespace schema_cases_test {

Json load(const char* file) {
  std::ifstream in(cases_dir() / file);
  EXPECT_TRUE(in.good()) << (cases_dir() / file);
  return Json::parse(in);
}

JsonOptions options_of(const Json& c) {
  JsonOptions o;
  if (!c.contains("options")) return o;
  const Json& j = c["options"];
  o.max_whitespace = j.value("max_whitespace", o.max_whitespace);
  o.strict_properties = j.value("strict_properties", o.strict_properties);
  o.strict_items = j.value("strict_items", o.strict_items);
  return o;
}

// A schema with the options' reading made explicit, for the checker (which reads JSON
// Schema literally): nothing to add, as the tables only use options where it agrees.
TEST(SchemaCases, GrammarAndCheckerAgreeWithTheTable) {
  Json cases = load("schema_cases.json");
  ASSERT_GE(cases.size(), 60u);
  size_t num_checked = 0;
  for (const Json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    GrammarSpec spec = GrammarSpec::json_schema(c["schema"], options_of(c));
    for (const Json& t : c["accept"]) {
      std::string text = t.get<std::string>();
      EXPECT_TRUE(accepts(spec, text)) << "grammar rejects " << text;
      EXPECT_TRUE(schema_valid_text(c["schema"], text)) << "checker rejects " << text;
      ++num_checked;
    }
    for (const Json& t : c["reject"]) {
      std::string text = t.get<std::string>();
      EXPECT_FALSE(accepts(spec, text)) << "grammar accepts " << text;
      EXPECT_FALSE(schema_valid_text(c["schema"], text)) << "checker accepts " << text;
      ++num_checked;
    }
    for (const Json& t : c.value("reject_stricter", Json::array())) {
      std::string text = t.get<std::string>();
      EXPECT_FALSE(accepts(spec, text)) << "grammar accepts " << text;
      EXPECT_TRUE(schema_valid_text(c["schema"], text)) << "checker rejects " << text;
      ++num_checked;
    }
  }
  EXPECT_GE(num_checked, 400u);
}

}  // namespace schema_cases_test
}  // namespace tandem::grammar::test
