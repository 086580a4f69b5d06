// Every golden string of every tokenizer (HF `tokenizers` outputs, tests/data/
// tokenizer_golden.json) encodes to the same ids with and without special tokens, and its
// ids decode to the same text.
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace tandem::test {
namespace golden_test {

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, VocabSizeMatches) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), goldens()[GetParam()]["vocab_size"].get<int>());
}

TEST_P(GoldenTest, EncodeMatches) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  for (const auto& g : goldens()[GetParam()]["encode"]) {
    std::string text = g["text"];
    EXPECT_EQ(tok->encode(text, false), g["ids"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tok->encode(text, true), g["ids_with_special"].get<std::vector<int32_t>>()) << text;
  }
}

TEST_P(GoldenTest, DecodeMatches) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  for (const auto& g : goldens()[GetParam()]["encode"]) {
    auto ids = g["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->decode(ids, false), g["decoded"].get<std::string>()) << g["text"];
  }
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, GoldenTest, ::testing::ValuesIn(golden_keys()),
                         golden_key_name);

}  // namespace golden_test
}  // namespace tandem::test
