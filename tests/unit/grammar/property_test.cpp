// Random walks through the masks of a real vocabulary (Qwen3): whatever allowed tokens are
// taken, the output is accepted by an independent checker once it ends, and a grammar with
// bounded sizes always ends.
#include <regex>

#include "grammar_test_support.h"
#include "schema_checker.h"
#include "vocab_fixtures.h"
#include "walk_support.h"

namespace tandem::grammar::test {
namespace property_test {

// Bounded: every string, array and number has a largest size, so every walk must end.
const char* const kBoundedSchemas[] = {
    R"({"type":"object","properties":{"location":{"type":"string","maxLength":24},
        "unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":14}},
        "required":["location","unit"],"additionalProperties":false})",
    R"({"type":"array","items":{"type":"object","properties":{"sku":{"type":"string",
        "pattern":"^[A-Z]{2}-[0-9]{3}$"},"qty":{"type":"integer","minimum":1,"maximum":99},
        "gift":{"type":"boolean"}},"required":["sku","qty"]},"minItems":1,"maxItems":3})",
    R"({"type":"object","properties":{"when":{"type":"string","format":"date-time"},
        "id":{"type":"string","format":"uuid"},"on":{"type":"string","format":"date"},
        "at":{"type":"string","format":"time"}},"required":["when","id","on","at"]})",
    R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"integer",
        "minimum":0,"maximum":1000}},"required":["kind","r"],"additionalProperties":false},
        {"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"integer","minimum":0,
        "maximum":9},"h":{"type":"integer","minimum":-5,"maximum":5}},"required":["kind","w","h"],
        "additionalProperties":false}]})",
    R"({"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},
        "scores":{"type":"array","prefixItems":[{"type":"integer","minimum":0,"maximum":10},
        {"type":"null"}],"items":false}},"required":["name"]})",
    R"({"type":"object","properties":{"answer":{"type":"string","maxLength":30},"confidence":
        {"enum":["low","medium","high"]},"sources":{"type":"array","items":{"type":"string",
        "maxLength":10},"maxItems":2}},"required":["answer","confidence","sources"]})",
};

// Unbounded: free strings, numbers, recursion; walks are cut short, and those that end
// must still validate.
const char* const kOpenSchemas[] = {
    R"({"type":"object","properties":{"title":{"type":"string"},"price":{"type":"number",
        "exclusiveMinimum":0},"tags":{"type":"array","items":{"type":"string"}}},
        "required":["title","price"]})",
    R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array",
        "items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/node"})",
    R"({"type":"object","additionalProperties":{"type":"number","minimum":-1,"maximum":1}})",
    R"({"anyOf":[{"type":"string"},{"type":"array","items":{"type":"integer"}},{"type":"null"}]})",
};

TEST(RandomWalks, BoundedSchemasAlwaysEndValid) {
  auto vocab = qwen3_vocab();
  if (!vocab) return;
  std::mt19937 rng(2024);
  for (const char* text : kBoundedSchemas) {
    Json schema = Json::parse(text);
    SCOPED_TRACE(schema.dump());
    auto g = compile_grammar(GrammarSpec::json_schema(schema), vocab);
    for (int w = 0; w < 12; ++w) {
      Walk walk = random_walk(Matcher(g), rng, 3000, 0.3, [](const auto& words, const Matcher& m) {
        if (m.must_end()) {
          ASSERT_EQ(allowed_ids(words), m.grammar().vocab().eos_ids());
        }
      });
      ASSERT_TRUE(walk.ended) << "no end after " << walk.num_steps << " tokens: " << walk.text;
      EXPECT_TRUE(schema_valid_text(schema, walk.text)) << walk.text;
    }
  }
}

TEST(RandomWalks, OpenSchemasValidWhenTheyEnd) {
  auto vocab = qwen3_vocab();
  if (!vocab) return;
  std::mt19937 rng(77);
  for (const char* text : kOpenSchemas) {
    Json schema = Json::parse(text);
    SCOPED_TRACE(schema.dump());
    auto g = compile_grammar(GrammarSpec::json_schema(schema), vocab);
    int num_ended = 0;
    for (int w = 0; w < 12; ++w) {
      Walk walk = random_walk(Matcher(g), rng, 400, 0.5, [](const auto&, const Matcher&) {});
      if (!walk.ended) continue;
      ++num_ended;
      EXPECT_TRUE(schema_valid_text(schema, walk.text)) << walk.text;
    }
    EXPECT_GT(num_ended, 0);
  }
}

TEST(RandomWalks, JsonObjectRegexChoicesGbnf) {
  auto vocab = qwen3_vocab();
  if (!vocab) return;
  std::mt19937 rng(5);
  auto walks = [&](const GrammarSpec& spec, size_t max_steps, auto&& valid) {
    SCOPED_TRACE(spec.key());
    auto g = compile_grammar(spec, vocab);
    int num_ended = 0;
    for (int w = 0; w < 10; ++w) {
      Walk walk = random_walk(Matcher(g), rng, max_steps, 0.5, [](const auto&, const Matcher&) {});
      if (!walk.ended) continue;
      ++num_ended;
      EXPECT_TRUE(valid(walk.text)) << walk.text;
    }
    EXPECT_GT(num_ended, 0);
  };
  walks(GrammarSpec::json_object(), 300, [](const std::string& t) {
    Json j = Json::parse(t, nullptr, false);
    return !j.is_discarded() && j.is_object();
  });
  walks(GrammarSpec::json_object(JsonOptions{.max_whitespace = 3}), 300, [](const std::string& t) {
    Json j = Json::parse(t, nullptr, false);
    return !j.is_discarded() && j.is_object();
  });
  std::string pattern = "([a-z]{1,5}_)?[0-9]{3}(-[A-F0-9]{2}){1,3}(;[xyz]+)*";
  std::regex re(pattern, std::regex::ECMAScript);
  walks(GrammarSpec::regex(pattern), 200,
        [&](const std::string& t) { return std::regex_match(t, re); });
  std::vector<std::string> choices = {"Paris", "Par", "Lyon", "Paris, France", "Nice"};
  walks(GrammarSpec::choice(choices), 20, [&](const std::string& t) {
    return std::find(choices.begin(), choices.end(), t) != choices.end();
  });
  // llama.cpp's JSON grammar, in short.
  const char* json_gbnf = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";
  walks(GrammarSpec::gbnf(json_gbnf), 300, [](const std::string& t) {
    Json j = Json::parse(t, nullptr, false);
    return !j.is_discarded() && j.is_object();
  });
}

}  // namespace property_test
}  // namespace tandem::grammar::test
