// Tokenizer::token_bytes, the vocabulary the grammar module follows: each id's bytes are
// exactly what it adds to the decoded text. Checked against HF decode itself on random
// token runs of every golden tokenizer (byte-level BPE, and Mistral's SentencePiece with
// byte fallback), and on hand-picked tokens.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/unicode.h"
#include "tokenizer_test_support.h"

namespace tandem {
namespace token_bytes_test {

// decode(ids) is the concatenation of the ids' bytes whenever that is valid UTF-8 (HF turns
// invalid bytes into U+FFFD), less the leading space a Strip decoder removes at the start.
TEST(TokenBytes, ConcatenationIsTheDecodedText) {
  for (const std::string& key : test::golden_keys()) {
    SCOPED_TRACE(key);
    auto tok = test::golden_tokenizer(key);
    ASSERT_NE(tok, nullptr);
    const std::vector<std::string> bytes = tok->token_bytes();
    ASSERT_EQ(bytes.size(), size_t(tok->vocab_size()));
    std::mt19937 rng(17);
    std::uniform_int_distribution<int32_t> pick(0, tok->vocab_size() - 1);
    int checked = 0;
    for (int run = 0; run < 400; run++) {
      std::vector<int32_t> ids;
      std::string joined;
      while (ids.size() < 6) {
        int32_t id = pick(rng);
        if (tok->is_special(id) || bytes[size_t(id)].empty()) continue;
        ids.push_back(id);
        joined += bytes[size_t(id)];
      }
      if (!tok::is_valid_utf8(joined)) continue;
      std::string text = tok->decode(ids, false);
      if (key == "mistral" && !joined.empty() && joined[0] == ' ' && text == joined.substr(1))
        text = joined;  // the Strip decoder's first-space rule
      EXPECT_EQ(text, joined) << "ids starting " << ids[0];
      checked++;
    }
    EXPECT_GT(checked, 50);  // runs that split a character are skipped
  }
}

TEST(TokenBytes, SpecialSpacesAndByteTokens) {
  auto qwen = test::golden_tokenizer("qwen3");
  ASSERT_NE(qwen, nullptr);
  auto q = qwen->token_bytes();
  EXPECT_EQ(q[size_t(*qwen->token_to_id("Ġ{"))], " {");
  EXPECT_EQ(q[size_t(*qwen->token_to_id("<|im_end|>"))], "<|im_end|>");
  EXPECT_EQ(q[size_t(*qwen->token_to_id("Ċ"))], "\n");
  auto mistral = test::golden_tokenizer("mistral");
  ASSERT_NE(mistral, nullptr);
  auto m = mistral->token_bytes();
  EXPECT_EQ(m[size_t(*mistral->token_to_id("▁the"))], " the");
  EXPECT_EQ(m[size_t(*mistral->token_to_id("<0x41>"))], "A");
  EXPECT_EQ(m[size_t(*mistral->token_to_id("<0xE2>"))], "\xE2");  // part of a character, raw
  EXPECT_EQ(m[size_t(*mistral->token_to_id("</s>"))], "</s>");
}

}  // namespace token_bytes_test
}  // namespace tandem
