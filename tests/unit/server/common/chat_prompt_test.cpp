#include "server/common/chat_prompt.h"

#include <gtest/gtest.h>

#include "server/common/api_error.h"

namespace tandem::server {
namespace {

const char* kLlamaDir = TANDEM_TEST_DATA "/oracle/llama";

std::shared_ptr<const ChatPromptBuilder> builder_with(
    const std::string& tmpl, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json config = {{"chat_template", tmpl},
                           {"bos_token", "<s>"},
                           {"eos_token", "<|im_end|>"},
                           {"sep_token", {{"content", "<sep>"}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) config[it.key()] = it.value();
  return ChatPromptBuilder::create(TokenizerConfig::parse(config, "test"),
                                   Tokenizer::load(kLlamaDir));
}

ChatPromptInput user(const std::string& text) {
  ChatPromptInput in;
  in.messages = Json::array({{{"role", "user"}, {"content", text}}});
  return in;
}

TEST(ChatPrompt, ChatMLTemplateOfTheOracleModel) {
  auto tok = Tokenizer::load(kLlamaDir);
  auto b = ChatPromptBuilder::create(TokenizerConfig::load(kLlamaDir), tok);
  ASSERT_TRUE(b);
  // Hand-derived from the template in tokenizer_config.json.
  EXPECT_EQ(b->render(user("Hi")), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ChatPromptInput no_gen = user("Hi");
  no_gen.add_generation_prompt = false;
  EXPECT_EQ(b->render(no_gen), "<|im_start|>user\nHi<|im_end|>\n");
  // The template writes the special tokens itself: no BOS added on top.
  std::string text = b->render(user("Hi"));
  EXPECT_EQ(b->tokens(user("Hi")), tok->encode(text, false));
  EXPECT_EQ(b->tokens(user("Hi")).front(), *tok->token_to_id("<|im_start|>"));
}

TEST(ChatPrompt, SpecialTokensToolsAndKwargsReachTheTemplate) {
  auto b = builder_with(
      "{{ bos_token }}{{ sep_token }}{% if tools %}[{{ tools[0].function.name }}]{% endif %}"
      "{% if enable_thinking is defined %}think={{ enable_thinking }}{% endif %}"
      "{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}");
  ChatPromptInput in = user("x");
  in.tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  in.template_kwargs = {{"enable_thinking", false}};
  EXPECT_EQ(b->render(in), "<s><sep>[f]think=Falsex>");
}

TEST(ChatPrompt, ToolUseTemplateIsPickedWhenToolsAreGiven) {
  nlohmann::json config = {{"chat_template",
                            {{{"name", "default"}, {"template", "D{{ messages[0].content }}"}},
                             {{"name", "tool_use"}, {"template", "T{{ messages[0].content }}"}}}}};
  auto b =
      ChatPromptBuilder::create(TokenizerConfig::parse(config, "test"), Tokenizer::load(kLlamaDir));
  ChatPromptInput in = user("x");
  EXPECT_EQ(b->render(in), "Dx");
  in.tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(b->render(in), "Tx");
}

TEST(ChatPrompt, RaisingTemplateIsA400WithItsMessage) {
  auto b = builder_with(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}{{ messages[0].content }}");
  ChatPromptInput in;
  in.messages = Json::array({{{"role", "system"}, {"content", "x"}}});
  try {
    b->render(in);
    FAIL() << "expected a 400";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("System role not supported"), std::string::npos)
        << e.what();
  }
}

TEST(ChatPrompt, ContinueFinalMessageLeavesItOpen) {
  auto tok = Tokenizer::load(kLlamaDir);
  auto b = ChatPromptBuilder::create(TokenizerConfig::load(kLlamaDir), tok);
  ChatPromptInput in;
  in.messages = Json::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}])");
  in.add_generation_prompt = false;
  in.continue_final_message = true;
  EXPECT_EQ(b->render(in), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHel");
}

TEST(ChatPrompt, NoTemplateMeansNoBuilder) {
  EXPECT_EQ(ChatPromptBuilder::create(TokenizerConfig::parse(nlohmann::json::object(), "t"),
                                      Tokenizer::load(kLlamaDir)),
            nullptr);
}

}  // namespace
}  // namespace tandem::server
