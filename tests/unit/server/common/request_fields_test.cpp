#include "server/common/request_fields.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/common/api_error.h"
#include "server/common/sampling_fields.h"
#include "server/common/structured_output.h"
#include "server/openai/openai_fields.h"

namespace tandem::server {
namespace request_fields_test {

// Runs fn, expecting a 400 that names `param`; returns the message.
template <typename Fn>
std::string expect_400(Fn&& fn, const std::string& param) {
  try {
    fn();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), param);
    return e.what();
  }
  ADD_FAILURE() << "expected a 400 for " << param;
  return {};
}

TEST(RequestFields, MalformedAndNonObjectBodies) {
  std::string msg = expect_400([] { parse_request_body("{\"a\": "); }, "");
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  expect_400([] { parse_request_body("[1, 2]"); }, "");
  EXPECT_EQ(parse_request_body("{\"a\": 1}")["a"], 1);
  std::string deep = "{\"a\": " + std::string(500, '[') + std::string(500, ']') + "}";
  msg = expect_400([&] { parse_request_body(deep); }, "");
  EXPECT_NE(msg.find("nests deeper"), std::string::npos) << msg;
  std::string fine = "{\"a\": " + std::string(50, '[') + std::string(50, ']') + "}";
  EXPECT_NO_THROW(parse_request_body(fine));
}

TEST(RequestFields, TypesAreChecked) {
  Json body = {{"b", "yes"}, {"s", 3}, {"i", 1.5}, {"n", "x"}, {"nul", nullptr}};
  FieldReader f(body);
  expect_400([&] { f.boolean("b"); }, "b");
  expect_400([&] { f.string("s"); }, "s");
  expect_400([&] { f.integer("i", 0, 10); }, "i");
  expect_400([&] { f.number("n", 0, 1); }, "n");
  EXPECT_FALSE(f.integer("nul", 0, 10));  // null reads as absent
  EXPECT_FALSE(f.has("missing"));
  std::string msg = expect_400([&] { f.require("missing"); }, "missing");
  EXPECT_NE(msg.find("required"), std::string::npos);
}

TEST(RequestFields, RangesAreChecked) {
  Json body = {{"t", 2.5}, {"p", 0.0}, {"k", 7}, {"f", 3.0}};
  FieldReader f(body);
  expect_400([&] { f.number("t", 0, 2); }, "t");
  expect_400([&] { f.number_above("p", 0, 1); }, "p");
  EXPECT_EQ(*f.integer("k", 0, 10), 7);
  EXPECT_EQ(*f.integer("f", 0, 10), 3);  // 3.0 is an integer
  expect_400([&] { f.integer("k", 8, 10); }, "k");
}

TEST(RequestFields, NestedNamesCarryThePath) {
  Json msg = {{"role", 5}};
  FieldReader f(msg, "messages[3]");
  expect_400([&] { f.string("role"); }, "messages[3].role");
}

TEST(RequestFields, StopStringOrList) {
  Json body = {{"a", "x"}, {"b", {"x", "y"}}, {"c", {"x", 1}}, {"d", ""}, {"e", 4}};
  FieldReader f(body);
  StringListBounds four{4, 16};
  EXPECT_EQ(f.string_or_list("a", four), std::vector<std::string>{"x"});
  EXPECT_EQ(f.string_or_list("b", four), (std::vector<std::string>{"x", "y"}));
  expect_400([&] { f.string_or_list("b", {1, 16}); }, "b");
  expect_400([&] { f.string_or_list("c", four); }, "c");
  expect_400([&] { f.string_or_list("d", four); }, "d");
  expect_400([&] { f.string_or_list("e", four); }, "e");
}

TEST(RequestFields, StopStringsAreBoundedInCountAndLengthNamingTheFlags) {
  Json body = {{"many", Json::array()}, {"long", std::string(300, 'x')}};
  for (int i = 0; i < 100000; ++i) body["many"].push_back("s");
  FieldReader f(body);
  StringListBounds bounds{16, 256, "--max-stop-strings", "--max-stop-length"};
  std::string msg = expect_400([&] { f.string_or_list("many", bounds); }, "many");
  EXPECT_NE(msg.find("100000 entries"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-stop-strings"), std::string::npos) << msg;
  msg = expect_400([&] { f.string_or_list("long", bounds); }, "long");
  EXPECT_NE(msg.find("300 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-stop-length"), std::string::npos) << msg;
  EXPECT_EQ(f.string_or_list("long", {16, 300}).front().size(), 300u);
}

TEST(SamplingFields, ReadsEveryField) {
  Json body = {{"temperature", 0.5},
               {"top_p", 0.9},
               {"top_k", -1},
               {"min_p", 0.1},
               {"presence_penalty", 0.5},
               {"frequency_penalty", -0.5},
               {"repetition_penalty", 1.2},
               {"seed", -1},
               {"stop", {"\n\n", "END"}},
               {"stop_token_ids", {5, 6}},
               {"min_tokens", 3},
               {"ignore_eos", true}};
  GenerationRequest r;
  r.sampling.top_k = 40;
  read_sampling_fields(FieldReader(body), SamplingFieldSpec{}, 512, r);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 0);  // -1 means off
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(*r.sampling.seed, ~uint64_t(0));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r.min_tokens, 3);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(SamplingFields, DefaultsSurviveAndRangesHold) {
  GenerationRequest r;
  r.sampling.temperature = 0.7f;  // a model default
  read_sampling_fields(FieldReader(Json::object()), SamplingFieldSpec{}, 512, r);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.7f);
  auto bad = [](Json body, const std::string& param) {
    GenerationRequest g;
    expect_400([&] { read_sampling_fields(FieldReader(body), SamplingFieldSpec{}, 512, g); },
               param);
  };
  bad({{"temperature", -0.1}}, "temperature");
  bad({{"temperature", 2.01}}, "temperature");
  bad({{"top_p", 0}}, "top_p");
  bad({{"top_p", 1.5}}, "top_p");
  bad({{"top_k", -2}}, "top_k");
  bad({{"min_p", 1.5}}, "min_p");
  bad({{"presence_penalty", 2.5}}, "presence_penalty");
  bad({{"repetition_penalty", 0}}, "repetition_penalty");
  bad({{"stop_token_ids", {512}}}, "stop_token_ids");
  bad({{"seed", "42"}}, "seed");
  SamplingFieldSpec anthropic;
  anthropic.stop_field = "stop_sequences";
  anthropic.max_temperature = 1.0;
  GenerationRequest g;
  expect_400(
      [&] {
        read_sampling_fields(FieldReader(Json{{"temperature", 1.5}}), anthropic, 512, g);
      },
      "temperature");
  read_sampling_fields(FieldReader(Json{{"stop_sequences", {"STOP"}}}), anthropic, 512, g);
  EXPECT_EQ(g.stop, std::vector<std::string>{"STOP"});
}

TEST(SamplingFields, ChoicesGetConsecutiveSeeds) {
  GenerationRequest base;
  base.sampling.seed = 10;
  auto choices = expand_choices(base, 3);
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(*choices[0].sampling.seed, 10u);
  EXPECT_EQ(*choices[2].sampling.seed, 12u);
  GenerationRequest unseeded;
  EXPECT_FALSE(expand_choices(unseeded, 2)[1].sampling.seed);
}

TEST(OpenAIFields, StreamOptionsAndFormats) {
  expect_400(
      [] {
        read_stream_options(FieldReader(Json{{"stream_options", {{"include_usage", true}}}}));
      },
      "stream_options");
  StreamOptions s = read_stream_options(
      FieldReader(Json{{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  EXPECT_TRUE(s.stream && s.include_usage);
  auto object = read_response_format(FieldReader(Json{{"response_format", {{"type", "json_object"}}}}));
  ASSERT_TRUE(object.has_value());
  EXPECT_EQ(object->kind, grammar::SpecKind::JsonObject);
  EXPECT_FALSE(read_response_format(FieldReader(Json{{"response_format", {{"type", "text"}}}})));
  Json strict = {{"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", {{"type", "object"}}}}}}}};
  auto schema = read_response_format(FieldReader(strict));
  ASSERT_TRUE(schema.has_value());
  EXPECT_EQ(schema->kind, grammar::SpecKind::JsonSchema);
  EXPECT_TRUE(schema->json.strict_properties);
  strict["response_format"]["json_schema"]["strict"] = false;
  EXPECT_FALSE(read_response_format(FieldReader(strict))->json.strict_properties);
  expect_400(
      [] { read_response_format(FieldReader(Json{{"response_format", {{"type", "json_schema"}}}})); },
      "response_format.json_schema");
  expect_400(
      [] { read_response_format(FieldReader(Json{{"response_format", {{"type", "yaml"}}}})); },
      "response_format.type");
  expect_400([] { read_num_choices(FieldReader(Json{{"n", 0}}), 128); }, "n");
  std::string n_msg = expect_400([] { read_num_choices(FieldReader(Json{{"n", 129}}), 128); }, "n");
  EXPECT_NE(n_msg.find("--max-choices"), std::string::npos) << n_msg;
  EXPECT_EQ(read_num_choices(FieldReader(Json{{"n", 129}}), 200), 129);
  expect_400(
      [] {
        check_unsupported_fields(FieldReader(Json{{"logit_bias", {{"5", 10}}}}), 1);
      },
      "logit_bias");
}

}  // namespace request_fields_test
}  // namespace tandem::server
