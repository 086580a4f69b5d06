// Random inputs: arbitrary bytes (invalid UTF-8 included) never crash encode; valid text
// round-trips through encode/decode for the byte-level tokenizers (and Mistral's
// SentencePiece BPE, whose byte fallback covers every character); random ids either decode
// or, outside [0, vocab_size), throw tandem::Error.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/unicode.h"
#include "tokenizer_test_support.h"

namespace tandem::test {
namespace fuzz_test {

// Text built from pieces that stress the pipeline: ASCII words and punctuation, runs of
// spaces and newlines, precomposed non-ASCII letters, CJK, emoji, digits, contractions, and
// fragments of special tokens. Every piece is NFC, so NFC-normalizing tokenizers round-trip.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {
      "the",        " cat",         "Hello", ",",    ".",  "!",   " ",    "  ",   "   ",
      "\n",         "\n\n",         "\t",    "\r\n", "é",  "ß",   "Ω",    "日本", "語",
      "😀",          "👍🏽",     "123",   "4567", "'s", "'LL", "<|",   "|>",   "<|im_start|>",
      "<|im_end|>", "<think>",      "_",     "{",    "}",  "()",  "x**2", "ﬁ",    "\xC2\xA0",
      "\xC2\x85",   "\xE3\x80\x80", "Ａ",    "a",    "Z"};
  std::string s;
  size_t n = rng() % 12;
  for (size_t i = 0; i < n; ++i) s += pieces[rng() % pieces.size()];
  return s;
}

// Any bytes: random ASCII and high bytes, so most strings are invalid UTF-8.
std::string random_bytes(std::mt19937& rng) {
  std::string s(rng() % 40, '\0');
  for (char& c : s) c = static_cast<char>(rng() % 3 == 0 ? 0x80 + rng() % 128 : rng() % 128);
  return s;
}

// A random valid string of arbitrary code points (combining marks, controls, astral...).
std::string random_code_points(std::mt19937& rng) {
  std::string s;
  size_t n = rng() % 16;
  for (size_t i = 0; i < n; ++i) {
    char32_t c;
    do {
      c = rng() % 4 == 0 ? rng() % 0x80 : rng() % 0x30000;
    } while (c >= 0xD800 && c <= 0xDFFF);
    tok::append_utf8(s, c);
  }
  return s;
}

class FuzzTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzTest, ArbitraryBytesNeverCrashAndDecodeToTheirRepair) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = random_bytes(rng);
    std::vector<int32_t> ids = tok->encode(bytes, true);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
    std::string text = tok->decode(ids, true);
    EXPECT_TRUE(tok::is_valid_utf8(text));
    // Byte-level tokenizers without a normalizer give back the input with each invalid
    // sequence replaced (which is what a Python str of those bytes would hold).
    if (GetParam() == "llama3_1" || GetParam() == "tiny-bpe") {
      EXPECT_EQ(text, tok::to_valid_utf8(bytes));
    }
  }
}

TEST_P(FuzzTest, ValidTextRoundTrips) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    std::string text = random_text(rng);
    if (GetParam() == "mistral") {
      // SentencePiece prepends "▁" to every stretch between special tokens, so only text
      // without them round-trips there.
      if (text.find("<s>") != std::string::npos || text.find("</s>") != std::string::npos ||
          text.find("<unk>") != std::string::npos)
        continue;
    }
    std::vector<int32_t> ids = tok->encode(text, false);
    EXPECT_EQ(tok->decode(ids, false), text) << "trial " << trial;
  }
}

// Tokenizers without a normalizer give back any valid text, combining marks and all
// (qwen3 NFC-normalizes, so it is left out).
TEST(Fuzz, ArbitraryCodePointsRoundTripWithoutNormalizer) {
  for (std::string key : {"tiny-bpe", "llama3_1", "mistral"}) {
    auto tok = golden_tokenizer(key);
    ASSERT_TRUE(tok);
    std::mt19937 rng(13);
    for (int trial = 0; trial < 300; ++trial) {
      std::string text = random_code_points(rng);
      if (key == "mistral" && (text.empty() || text.find('<') != std::string::npos)) continue;
      EXPECT_EQ(tok->decode(tok->encode(text, false), false), text) << key << " trial " << trial;
    }
  }
}

TEST_P(FuzzTest, RandomIdsDecodeOrThrowOutOfRange) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  std::mt19937 rng(17);
  int vocab = tok->vocab_size();
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(rng() % 20);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
    std::string text = tok->decode(ids, trial % 2 == 0);
    EXPECT_TRUE(tok::is_valid_utf8(text));
    ids.push_back(trial % 3 == 0 ? -1 - static_cast<int32_t>(rng() % 5)
                                 : vocab + static_cast<int32_t>(rng() % 1000));
    std::swap(ids.back(), ids[rng() % ids.size()]);
    EXPECT_THROW(tok->decode(ids, false), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, FuzzTest, ::testing::ValuesIn(golden_keys()),
                         golden_key_name);

}  // namespace fuzz_test
}  // namespace tandem::test
