// tokenizer_config.json parsing and the synthetic byte-level tokenizer for random models.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "tokenizer_test_support.h"

namespace tandem::test {
namespace tokenizer_config_test {

using nlohmann::json;

std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("tandem_tokcfg_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(TokenizerConfig, TokensAsStringsOrObjects) {
  json j = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}, {"lstrip", false}}},
            {"eos_token", "</s>"},
            {"pad_token", nullptr},
            {"add_bos_token", true},
            {"chat_template", "{{ messages }}"},
            {"custom_field", 7}};
  TokenizerConfig c = TokenizerConfig::parse(j, "cfg");
  EXPECT_EQ(c.bos_token, "<s>");
  EXPECT_EQ(c.eos_token, "</s>");
  EXPECT_FALSE(c.pad_token.has_value());
  EXPECT_FALSE(c.unk_token.has_value());
  EXPECT_EQ(c.add_bos_token, true);
  EXPECT_FALSE(c.add_eos_token.has_value());
  EXPECT_EQ(c.chat_template, "{{ messages }}");
  EXPECT_EQ(c.raw()["custom_field"], 7);
}

TEST(TokenizerConfig, NamedTemplatesExposeTheDefault) {
  json j = {
      {"chat_template",
       {{{"name", "default"}, {"template", "D"}}, {{"name", "tool_use"}, {"template", "T"}}}}};
  TokenizerConfig c = TokenizerConfig::parse(j, "cfg");
  EXPECT_EQ(c.chat_template, "D");
  EXPECT_EQ(c.named_templates.at("tool_use"), "T");
  EXPECT_EQ(c.named_templates.size(), 2u);
  EXPECT_THROW(TokenizerConfig::parse({{"chat_template", 5}}, "cfg"), Error);
}

TEST(TokenizerConfig, LoadsFromDirectory) {
  auto dir = fresh_dir("load");
  TokenizerConfig empty = TokenizerConfig::load(dir);  // no file: empty config
  EXPECT_FALSE(empty.eos_token.has_value());
  EXPECT_FALSE(empty.chat_template.has_value());
  std::ofstream(dir / "chat_template.jinja") << "JINJA";
  EXPECT_EQ(TokenizerConfig::load(dir).chat_template, "JINJA");
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  TokenizerConfig c = TokenizerConfig::load(dir);
  EXPECT_EQ(c.eos_token, "<|im_end|>");
  EXPECT_EQ(c.chat_template, "JINJA");
  std::ofstream(dir / "tokenizer_config.json") << "{broken";
  EXPECT_THROW(TokenizerConfig::load(dir), Error);
  std::filesystem::remove_all(dir);
}

TEST(TokenizerConfig, OracleModelConfig) {
  TokenizerConfig c = TokenizerConfig::load(test_data() / "oracle" / "llama");
  EXPECT_EQ(c.eos_token, "<|im_end|>");
  EXPECT_EQ(c.pad_token, "<|endoftext|>");
  EXPECT_FALSE(c.bos_token.has_value());
  EXPECT_EQ(c.add_bos_token, false);
  ASSERT_TRUE(c.chat_template.has_value());
  EXPECT_NE(c.chat_template->find("<|im_start|>"), std::string::npos);
}

TEST(ByteLevelTokenizerJson, LoadsWithChatMLSpecialsAndRoundTrips) {
  auto tok = Tokenizer::from_json_text(byte_level_tokenizer_json(32000), "synthetic");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->token_to_id("<|endoftext|>"), 0);
  EXPECT_EQ(tok->token_to_id("<|im_start|>"), 1);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 2);
  for (int id : {0, 1, 2}) EXPECT_TRUE(tok->is_special(id));
  EXPECT_FALSE(tok->is_special(3));
  std::string text =
      "<|im_start|>user\nthe quick brown fox, \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80<|im_end|>";
  std::vector<int32_t> ids = tok->encode(text, true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_LT(ids.size(), text.size() / 2);  // the letter merges apply
  EXPECT_EQ(tok->decode(ids, false), text);
  // Every id decodes to something (random-weight models sample any id).
  std::vector<int32_t> all(tok->vocab_size());
  for (int i = 0; i < tok->vocab_size(); ++i) all[i] = i;
  EXPECT_GT(tok->decode(all, true).size(), 0u);
  EXPECT_THROW(byte_level_tokenizer_json(100), Error);
  EXPECT_EQ(Tokenizer::from_json_text(byte_level_tokenizer_json(259))->vocab_size(), 259);
}

}  // namespace tokenizer_config_test
}  // namespace tandem::test
