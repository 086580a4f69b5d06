// The byte bound on a prompt's tokens: it exists only for tokenizers where it is safe,
// and where it exists it is a true lower bound on what encode() returns.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "../test_server.h"
#include "server/common/prompt_bound.h"

namespace tandem::server::testing {
namespace prompt_bound_test {

nlohmann::json llama_tokenizer_json() {
  std::ifstream in(std::string(llama_dir()) + "/tokenizer.json");
  return nlohmann::json::parse(in);
}

PromptBound bound_of(const nlohmann::json& tj) {
  auto tok = Tokenizer::from_json_text(tj.dump());
  return PromptBound::from_tokenizer(tj, *tok);
}

TEST(PromptBound, AByteLevelBpeBoundsItsTokensFromBelow) {
  nlohmann::json tj = llama_tokenizer_json();
  auto tok = Tokenizer::from_json_text(tj.dump());
  PromptBound b = PromptBound::from_tokenizer(tj, *tok);
  ASSERT_TRUE(b.max_bytes_per_token());
  EXPECT_GE(*b.max_bytes_per_token(), 13u);  // "<|endoftext|>": an added token's bytes count
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {
      "a", "e", " ", "the", "\n", "é", "日本", "🙂", "<|im_start|>", "\xff", "  "};
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    int n = int(rng() % 400);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    int64_t tokens = int64_t(tok->encode(text, false).size());
    EXPECT_GE(tokens, b.min_tokens(text.size())) << text;
  }
  EXPECT_EQ(b.min_tokens(0), 0);
  EXPECT_GE(b.min_tokens(15u << 20), 15 << 20 >> 6);  // a 15 MB prompt: ≥ 245k tokens
}

TEST(PromptBound, NormalizersThatComposeOrLowercaseWidenTheBoundFourTimes) {
  nlohmann::json tj = llama_tokenizer_json();
  PromptBound plain = bound_of(tj);
  tj["normalizer"] = {{"type", "Sequence"},
                      {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
  PromptBound composed = bound_of(tj);
  ASSERT_TRUE(plain.max_bytes_per_token() && composed.max_bytes_per_token());
  EXPECT_EQ(*composed.max_bytes_per_token(), 4 * *plain.max_bytes_per_token());
  tj["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}};
  EXPECT_EQ(bound_of(tj).max_bytes_per_token(), plain.max_bytes_per_token());
}

TEST(PromptBound, NoBoundWhereTextCanVanishBeforeTheModel) {
  nlohmann::json base = llama_tokenizer_json();
  auto without = [&](auto change) {
    nlohmann::json tj = base;
    change(tj);
    return bound_of(tj).max_bytes_per_token().has_value();
  };
  // Each of these can turn megabytes into a handful of tokens.
  EXPECT_FALSE(without([](auto& tj) {
    tj["normalizer"] = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}};
  }));
  EXPECT_FALSE(without([](auto& tj) {
    tj["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "  "}}}, {"content", " "}};
  }));
  EXPECT_FALSE(without([](auto& tj) {
    tj["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}};
  }));
  EXPECT_FALSE(without([](auto& tj) {
    tj["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers", {{{"type", "Whitespace"}}, tj["pre_tokenizer"]}}};
  }));
  EXPECT_FALSE(without([](auto& tj) {
    tj["model"]["unk_token"] = "<|endoftext|>";
    tj["model"]["fuse_unk"] = true;
  }));
  EXPECT_TRUE(without([](auto&) {}));
}

}  // namespace prompt_bound_test
}  // namespace tandem::server::testing
