// The server's prompt building against transformers' apply_chat_template: every template
// of tests/data/chat_templates and every scenario of chat_template_golden.json, sent the
// way an OpenAI client sends them (tool-call arguments as a JSON string, enable_thinking
// in chat_template_kwargs), must render to the golden text — or fail where HF failed.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/common/api_error.h"
#include "server/common/chat_prompt.h"
#include "server/openai/chat_messages.h"

namespace tandem::server {
namespace chat_prompt_golden_test {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The scenario as an OpenAI request body would carry it.
Json as_openai_messages(Json messages) {
  for (Json& m : messages)
    if (m.contains("tool_calls"))
      for (Json& call : m["tool_calls"])
        call["function"]["arguments"] = call["function"]["arguments"].dump();
  return messages;
}

ChatPromptInput input_for(const Json& scenario, const std::string& now) {
  ChatPromptInput in;
  in.messages = normalize_openai_messages(as_openai_messages(scenario["messages"]));
  if (scenario.contains("tools")) in.tools = normalize_openai_tools(&scenario["tools"]);
  in.add_generation_prompt = scenario.value("add_generation_prompt", true);
  if (scenario.contains("enable_thinking"))
    in.template_kwargs["enable_thinking"] = scenario["enable_thinking"];
  in.now = now;
  return in;
}

TEST(ChatPromptGolden, MatchesTransformers) {
  Json golden = Json::parse(read_file(TANDEM_TEST_DATA "/chat_template_golden.json"));
  auto tok = Tokenizer::load(TANDEM_TEST_DATA "/oracle/llama");
  std::string now = golden["strftime_now_fixed"];
  int checked = 0;
  for (auto& [name, scenarios] : golden["templates"].items()) {
    nlohmann::json config = {
        {"chat_template", read_file(TANDEM_TEST_DATA "/chat_templates/" + name + ".jinja")},
        {"bos_token", golden["bos_token"]},
        {"eos_token", golden["eos_token"]}};
    auto builder = ChatPromptBuilder::create(TokenizerConfig::parse(config, name), tok);
    ASSERT_TRUE(builder) << name;
    for (auto& [scenario_name, expected] : scenarios.items()) {
      SCOPED_TRACE(name + " / " + scenario_name);
      ChatPromptInput in = input_for(golden["scenarios"][scenario_name], now);
      if (expected.contains("text")) {
        EXPECT_EQ(builder->render(in), expected["text"].get<std::string>());
      } else {
        EXPECT_THROW(builder->render(in), ApiError) << expected["error"];
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 330);
}

}  // namespace chat_prompt_golden_test
}  // namespace tandem::server
