// The streaming detokenizer against Tokenizer::decode (itself checked against HF's goldens):
// the concatenated chunks equal decode(all ids); every chunk boundary is a prefix of that
// final text and valid UTF-8; and text is not held back once HF's decode of the ids so far
// is already final.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/unicode.h"
#include "tokenizer_test_support.h"

namespace tandem::test {
namespace incremental_decoder_test {

// Streams ids through an IncrementalDecoder checking the invariants; returns the text.
std::string stream_and_check(const std::shared_ptr<const Tokenizer>& tok,
                             const std::vector<int32_t>& ids, bool skip_special,
                             bool check_no_holdback) {
  const std::string final_text = tok->decode(ids, skip_special);
  IncrementalDecoder dec(tok, skip_special);
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    std::string chunk = dec.push(ids[k]);
    EXPECT_TRUE(tok::is_valid_utf8(chunk)) << "chunk " << k;
    out += chunk;
    EXPECT_TRUE(final_text.starts_with(out))
        << "after " << k + 1 << " ids the stream is ahead of decode: '" << out << "' vs '"
        << final_text << "'";
    if (!check_no_holdback) continue;
    // Once decode(ids[0..k]) is a prefix of the final text and the last id is not part of
    // an open <0xNN> run, nothing needs holding back.
    std::vector<int32_t> prefix(ids.begin(), ids.begin() + k + 1);
    std::string so_far = tok->decode(prefix, skip_special);
    bool byte_run =
        tok->id_to_token(ids[k]).size() == 6 && tok->id_to_token(ids[k]).starts_with("<0x");
    if (final_text.starts_with(so_far) && !byte_run) {
      EXPECT_EQ(out, so_far) << "held back after " << k + 1 << " ids";
    }
  }
  out += dec.finish();
  EXPECT_EQ(out, final_text);
  return out;
}

class IncrementalGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IncrementalGoldenTest, ReproducesDecodeOfEveryGolden) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  for (const auto& g : goldens()[GetParam()]["encode"]) {
    SCOPED_TRACE(g["text"].get<std::string>());
    auto ids = g["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(stream_and_check(tok, ids, false, true), g["decoded"].get<std::string>());
    auto with_special = g["ids_with_special"].get<std::vector<int32_t>>();
    stream_and_check(tok, with_special, false, true);
    stream_and_check(tok, with_special, true, true);
  }
}

TEST_P(IncrementalGoldenTest, RandomIdSequencesMatchDecode) {
  auto tok = golden_tokenizer(GetParam());
  ASSERT_TRUE(tok);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_id(0, tok->vocab_size() - 1);
  std::uniform_int_distribution<int32_t> low_id(0, 300);  // bytes and byte-fallback tokens
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> ids(rng() % 24);
    for (auto& id : ids) id = rng() % 2 ? any_id(rng) : low_id(rng);
    stream_and_check(tok, ids, trial % 2 == 0, false);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTokenizers, IncrementalGoldenTest, ::testing::ValuesIn(golden_keys()),
                         golden_key_name);

std::vector<int32_t> ids_of(const Tokenizer& tok, std::initializer_list<const char*> tokens) {
  std::vector<int32_t> ids;
  for (const char* t : tokens) {
    auto id = tok.token_to_id(t);
    EXPECT_TRUE(id.has_value()) << t;
    ids.push_back(id.value_or(0));
  }
  return ids;
}

TEST(IncrementalDecoder, ByteLevelWaitsForWholeCharacter) {
  auto tok = golden_tokenizer("qwen3");
  ASSERT_TRUE(tok);
  // U+1F600 is F0 9F 98 80; in the GPT-2 byte alphabet those bytes are "ð", "Ł", "ĺ", "Ģ".
  auto ids = ids_of(*tok, {"Hi", "ð", "Ł", "ĺ", "Ģ", "!"});
  IncrementalDecoder dec(tok, false);
  EXPECT_EQ(dec.push(ids[0]), "Hi");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), "");
  EXPECT_EQ(dec.push(ids[4]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(dec.push(ids[5]), "!");
  EXPECT_EQ(dec.finish(), "");
}

TEST(IncrementalDecoder, ByteLevelIncompleteTailBecomesReplacementAtFinish) {
  auto tok = golden_tokenizer("qwen3");
  ASSERT_TRUE(tok);
  auto ids = ids_of(*tok, {"a", "ð", "Ł"});  // "a" + F0 9F: truncated
  IncrementalDecoder dec(tok, false);
  EXPECT_EQ(dec.push(ids[0]), "a");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.finish(), "\xEF\xBF\xBD");  // one U+FFFD for the maximal subpart F0 9F
}

TEST(IncrementalDecoder, ByteFallbackRunIsHeldUntilItEnds) {
  auto tok = golden_tokenizer("mistral");
  ASSERT_TRUE(tok);
  // "日" is E6 97 A5; a valid run decodes to the character, then "▁a" follows.
  auto ids = ids_of(*tok, {"▁x", "<0xE6>", "<0x97>", "<0xA5>", "▁a"});
  IncrementalDecoder dec(tok, false);
  EXPECT_EQ(dec.push(ids[0]), "x");  // the leading space is stripped
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), "");  // complete, but a later byte could still spoil the run
  EXPECT_EQ(dec.push(ids[4]), "\xE6\x97\xA5 a");
  EXPECT_EQ(dec.finish(), "");
}

TEST(IncrementalDecoder, InvalidByteFallbackRunIsOneReplacementPerByte) {
  auto tok = golden_tokenizer("mistral");
  ASSERT_TRUE(tok);
  // E6 97 A5 FF is not UTF-8, so HF turns all four byte tokens into U+FFFD.
  auto ids = ids_of(*tok, {"<0xE6>", "<0x97>", "<0xA5>", "<0xFF>", "▁b"});
  std::string expected = "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD b";
  EXPECT_EQ(tok->decode(ids, false), expected);
  IncrementalDecoder dec(tok, false);
  std::string out;
  for (int32_t id : ids) out += dec.push(id);
  out += dec.finish();
  EXPECT_EQ(out, expected);
}

TEST(IncrementalDecoder, MetaspaceLeadingSpaceOnlyOnFirstText) {
  auto tok = golden_tokenizer("mistral");
  ASSERT_TRUE(tok);
  auto ids = ids_of(*tok, {"▁", "▁Hello", "▁world"});
  // HF: " " + " Hello" + " world", then Strip removes one leading space.
  EXPECT_EQ(tok->decode(ids, false), " Hello world");
  IncrementalDecoder dec(tok, false);
  EXPECT_EQ(dec.push(ids[0]), "");
  EXPECT_EQ(dec.push(ids[1]), " Hello");
  EXPECT_EQ(dec.push(ids[2]), " world");
  EXPECT_EQ(dec.finish(), "");
}

TEST(IncrementalDecoder, SkipsSpecialTokensWhenAsked) {
  auto tok = golden_tokenizer("llama3_1");
  ASSERT_TRUE(tok);
  std::vector<int32_t> ids = tok->encode("Hi there", true);
  ASSERT_TRUE(tok->is_special(ids[0]));
  IncrementalDecoder skip(tok, true), keep(tok, false);
  EXPECT_EQ(skip.push(ids[0]), "");
  EXPECT_EQ(keep.push(ids[0]), "<|begin_of_text|>");
}

TEST(IncrementalDecoder, OutOfRangeIdThrows) {
  auto tok = golden_tokenizer("tiny-bpe");
  ASSERT_TRUE(tok);
  IncrementalDecoder dec(tok, false);
  EXPECT_THROW(dec.push(tok->vocab_size()), Error);
  EXPECT_THROW(dec.push(-1), Error);
  EXPECT_EQ(dec.push(tok->encode("a", false)[0]), "a");  // still usable afterwards
}

}  // namespace incremental_decoder_test
}  // namespace tandem::test
