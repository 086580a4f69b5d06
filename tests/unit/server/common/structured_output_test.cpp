// The request side of structured output: vLLM and llama.cpp fields read into one spec,
// forced tool calls compiled to the whole call text the parser reads back (references
// inside a tool's parameters re-rooted), and compile errors as 400s naming keyword and path.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/common/api_error.h"
#include "server/common/structured_output.h"
#include "server/common/tool_calls.h"

namespace tandem::server {
namespace structured_output_test {

std::shared_ptr<const grammar::TokenVocab> byte_vocab() {
  grammar::TokenVocabParams p;
  for (int b = 0; b < 256; b++) p.token_bytes.push_back(std::string(1, char(b)));
  p.token_bytes.push_back("<eos>");
  p.is_special.assign(p.token_bytes.size(), 0);
  p.is_special.back() = 1;
  p.eos_ids = {256};
  return std::make_shared<const grammar::TokenVocab>(std::move(p));
}

bool accepts(const grammar::GrammarSpec& spec, const std::string& text) {
  grammar::Matcher m(grammar::compile_grammar(spec, byte_vocab()));
  return m.accept_bytes(text) && m.can_end();
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "book", "parameters": {
    "$defs": {"day": {"type": "string", "pattern": "^[0-9]{2}$"}},
    "type": "object", "properties": {"on": {"$ref": "#/$defs/day"}}, "required": ["on"]}}}
])");

TEST(StructuredOutput, ForcedToolCallsAreWholeCallsTheParserReads) {
  auto any = tool_call_spec(kTools, {.forced = true, .name = std::nullopt}, ToolCallFormat::Hermes, "tool_choice");
  const std::string call = "<tool_call>\n{\"name\":\"book\",\"arguments\":{\"on\":\"07\"}}\n</tool_call>";
  EXPECT_TRUE(accepts(any, call));
  EXPECT_TRUE(accepts(any, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(any, "<tool_call>\n{\"name\":\"book\",\"arguments\":{\"on\":\"7\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(any, "{\"name\":\"book\",\"arguments\":{\"on\":\"07\"}}"));
  ToolCallParse parsed = parse_tool_calls(call);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "book");
  EXPECT_EQ(Json::parse(parsed.calls[0].arguments), Json::parse(R"({"on":"07"})"));

  auto named = tool_call_spec(kTools, {.forced = true, .name = "get_weather"}, ToolCallFormat::LlamaJson, "tool_choice");
  EXPECT_TRUE(accepts(named, "{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Rome\"}}"));
  EXPECT_FALSE(accepts(named, "{\"name\":\"book\",\"parameters\":{\"on\":\"07\"}}"));
  auto json_calls = parse_json_tool_calls("{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Rome\"}}");
  ASSERT_TRUE(json_calls && json_calls->size() == 1);

  try {
    tool_call_spec(kTools, {.forced = true, .name = "nope"}, ToolCallFormat::Hermes, "tool_choice");
    ADD_FAILURE() << "an unknown tool name was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "tool_choice");
  }
}

TEST(StructuredOutput, VllmAndLlamaCppFields) {
  auto regex = read_structured_outputs(FieldReader(Json{{"structured_outputs", {{"regex", "[0-9]+"}}}}));
  ASSERT_TRUE(regex.spec);
  EXPECT_EQ(regex.spec->kind, grammar::SpecKind::Regex);
  EXPECT_EQ(regex.param, "structured_outputs.regex");
  auto choice = read_structured_outputs(FieldReader(Json{{"structured_outputs", {{"choice", {"a", "b"}}}}}));
  ASSERT_TRUE(choice.spec);
  EXPECT_EQ(choice.spec->choices, (std::vector<std::string>{"a", "b"}));
  auto text_schema = read_structured_outputs(FieldReader(Json{{"structured_outputs", {{"json", R"({"type":"integer"})"}}}}));
  ASSERT_TRUE(text_schema.spec);
  ASSERT_TRUE(text_schema.spec->schema);
  EXPECT_EQ(*text_schema.spec->schema, Json::parse(R"({"type":"integer"})"));
  auto gbnf = read_structured_outputs(FieldReader(Json{{"grammar", "root ::= \"x\""}}));
  ASSERT_TRUE(gbnf.spec);
  EXPECT_EQ(gbnf.spec->kind, grammar::SpecKind::Gbnf);
  EXPECT_FALSE(read_structured_outputs(FieldReader(Json::object())).spec);
  EXPECT_THROW(read_output_constraint(FieldReader(Json{{"response_format", {{"type", "json_object"}}},
                                                       {"grammar", "root ::= \"x\""}})),
               ApiError);
}

// A schema sent as JSON text is parsed within the same bounds as the request body.
TEST(StructuredOutput, SchemaTextIsParsedWithinTheJsonLimits) {
  std::string deep = R"({"type":"array","items":)";
  for (int i = 0; i < 8; ++i) deep += R"({"type":"array","items":)";
  deep += R"({"type":"integer"})" + std::string(9, '}');
  Json body = {{"structured_outputs", {{"json", deep}}}};
  JsonLimits shallow;
  shallow.max_depth = 4;
  try {
    read_output_constraint(FieldReader(body), shallow);
    ADD_FAILURE() << "a schema text nested past max_depth was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "structured_outputs.json");
  }
  EXPECT_TRUE(read_output_constraint(FieldReader(body)).spec);  // within the default depth
}

TEST(StructuredOutput, CompileErrorsAre400sNamingKeywordAndPath) {
  grammar::GrammarCache cache(byte_vocab());
  GenerationRequest g;
  OutputConstraint bad{grammar::GrammarSpec::json_schema(
                           Json::parse(R"({"properties":{"n":{"type":"integer","multipleOf":2}}})")),
                       "response_format"};
  try {
    attach_grammar(cache, bad, g);
    ADD_FAILURE() << "multipleOf was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "response_format");
    EXPECT_NE(std::string(e.what()).find("'multipleOf'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/properties/n"), std::string::npos) << e.what();
  }
  EXPECT_EQ(g.grammar, nullptr);
  attach_grammar(cache, {grammar::GrammarSpec::json_object(), "response_format"}, g);
  EXPECT_NE(g.grammar, nullptr);
}

}  // namespace structured_output_test
}  // namespace tandem::server
