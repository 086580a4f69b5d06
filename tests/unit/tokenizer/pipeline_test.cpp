// The pipeline stages on small hand-made tokenizer.json files, with expectations derived by
// hand from HF's rules: added-token matching (lstrip/rstrip/single_word/normalized),
// Metaspace prepend schemes, normalizers, pre-tokenizers, post-processors and decoders.
#include <gtest/gtest.h>

#include <thread>

#include "tokenizer/decoder.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer_test_support.h"

namespace tandem::test {
namespace pipeline_test {

using nlohmann::json;

// A tokenizer whose model has one token per character of `chars` (ids in order) and no
// merges, so the ids show exactly how the text was cut.
json char_tokenizer(const std::vector<std::string>& chars) {
  json vocab = json::object();
  for (size_t i = 0; i < chars.size(); ++i) vocab[chars[i]] = i;
  return bare_tokenizer(vocab, json::array());
}

json added(int id, const std::string& content, json flags = json::object()) {
  json t = {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
            {"rstrip", false}, {"normalized", false}, {"special", true}};
  t.update(flags);
  return t;
}

std::shared_ptr<const Tokenizer> build(const json& j) {
  return Tokenizer::from_json_text(j.dump());
}

using Ids = std::vector<int32_t>;

TEST(AddedTokens, StripAndSingleWordRules) {
  json j = char_tokenizer({"a", "b", " ", "x", "."});  // ids 0..4
  j["added_tokens"] = {added(10, "<L>", {{"lstrip", true}}), added(11, "<R>", {{"rstrip", true}}),
                       added(12, "ab", {{"single_word", true}})};
  auto tok = build(j);
  EXPECT_EQ(tok->encode("a  <L> b", false), (Ids{0, 10, 2, 1}));  // spaces before <L> swallowed
  EXPECT_EQ(tok->encode("a <R>  b", false), (Ids{0, 2, 11, 1}));  // spaces after <R> swallowed
  EXPECT_EQ(tok->encode("ab", false), (Ids{12}));
  EXPECT_EQ(tok->encode("x ab.", false), (Ids{3, 2, 12, 4}));
  EXPECT_EQ(tok->encode("xab", false), (Ids{3, 0, 1}));  // inside a word: not a match
  EXPECT_EQ(tok->encode("abx", false), (Ids{0, 1, 3}));
}

TEST(AddedTokens, LongestMatchWins) {
  json j = char_tokenizer({"<", ">", "a"});
  j["added_tokens"] = {added(5, "<a"), added(6, "<a>"), added(7, "a>")};
  auto tok = build(j);
  EXPECT_EQ(tok->encode("<a>a>", false), (Ids{6, 7}));
  EXPECT_EQ(tok->encode("<<a", false), (Ids{0, 5}));
}

// HF's split_special_tokens: a special token's text is encoded as the text it is, while
// added tokens that are not special still match; a special match is not retried shorter.
TEST(AddedTokens, SplitSpecialTokensEncodesTheirTextAsText) {
  json j = char_tokenizer({"<", ">", "a", "e", "n", "d"});  // ids 0..5
  j["added_tokens"] = {added(10, "<end>"), added(11, "<a>", {{"special", false}}),
                       added(12, "<en", {{"special", false}})};
  auto tok = build(j);
  EXPECT_EQ(tok->encode("a<end><a>", false), (Ids{2, 10, 11}));
  EXPECT_EQ(tok->encode("a<end><a>", false, /*split_special_tokens=*/true),
            (Ids{2, 0, 3, 4, 5, 1, 11}));
  // "<en" is a prefix of the special "<end>": the longer special match wins, then is text.
  EXPECT_EQ(tok->encode("<end", false, true), (Ids{12, 5}));
  EXPECT_EQ(tok->encode("<end>", false, true), (Ids{0, 3, 4, 5, 1}));
}

TEST(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  json j = char_tokenizer({"<", ">", "f", "o"});
  j["normalizer"] = {{"type", "Lowercase"}};
  j["added_tokens"] = json::array({added(9, "<Foo>", {{"normalized", true}, {"special", false}})});
  auto tok = build(j);
  EXPECT_EQ(tok->encode("<FOO><foo>", false), (Ids{9, 9}));
  EXPECT_FALSE(tok->is_special(9));
  EXPECT_EQ(tok->id_to_token(9), "<Foo>");
  EXPECT_EQ(tok->token_to_id("<Foo>"), 9);
}

json metaspace_tokenizer(const std::string& scheme) {
  json j = char_tokenizer({"\xE2\x96\x81", "a",
                           "\xE2\x96\x81"
                           "a",
                           "<s>"});
  j["model"]["merges"] = {"\xE2\x96\x81 a"};
  j["added_tokens"] = json::array({added(3, "<s>")});
  json ms = {{"type", "Metaspace"},
             {"replacement", "\xE2\x96\x81"},
             {"prepend_scheme", scheme},
             {"split", true}};
  j["pre_tokenizer"] = ms;
  j["decoder"] = ms;
  return j;
}

TEST(Metaspace, PrependSchemes) {
  // "first" prepends only to the stretch at the very start of the input.
  EXPECT_EQ(build(metaspace_tokenizer("first"))->encode("a<s>a", false), (Ids{2, 3, 1}));
  EXPECT_EQ(build(metaspace_tokenizer("first"))->encode("<s>a", false), (Ids{3, 1}));
  EXPECT_EQ(build(metaspace_tokenizer("always"))->encode("a<s>a", false), (Ids{2, 3, 2}));
  EXPECT_EQ(build(metaspace_tokenizer("never"))->encode("a<s>a", false), (Ids{1, 3, 1}));
  // "a a" -> "▁a▁a" split before each "▁".
  EXPECT_EQ(build(metaspace_tokenizer("always"))->encode("a a", false), (Ids{2, 2}));
}

TEST(Metaspace, DecoderDropsReplacementOnlyInTheFirstToken) {
  auto tok = build(metaspace_tokenizer("first"));
  EXPECT_EQ(tok->decode(Ids{2, 3, 2}, false), "a<s> a");
  EXPECT_EQ(tok->decode(Ids{2, 3, 2}, true), "a a");
  EXPECT_EQ(build(metaspace_tokenizer("never"))->decode(Ids{2, 2}, false), " a a");
}

TEST(Normalizers, StripLowercaseReplacePrepend) {
  json j = char_tokenizer({"\xE2\x96\x81", "h", "i", "t", "e", "r"});
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
        {{"type", "Lowercase"}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}},
        {{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}}}};
  // "  Hi There " -> "hi there" -> "hi▁there" -> "▁hi▁there"
  EXPECT_EQ(build(j)->encode("  Hi There ", false), (Ids{0, 1, 2, 0, 3, 1, 4, 5, 4}));
}

TEST(Normalizers, UnicodeFormsAndRegexReplace) {
  json j = char_tokenizer({"e", "\xCC\x81", "\xC3\xA9", "f", "i", "-"});
  j["normalizer"] = {{"type", "NFKD"}};
  // é decomposes to e + U+0301; the ligature ﬁ to f i.
  EXPECT_EQ(build(j)->encode("\xC3\xA9\xEF\xAC\x81", false), (Ids{0, 1, 3, 4}));
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(build(j)->encode("e\xCC\x81", false), (Ids{2}));
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "[0-9]+"}}}, {"content", "-"}};
  EXPECT_EQ(build(j)->encode("f12i3", false), (Ids{3, 5, 4, 5}));
}

std::vector<std::string> pieces_of(const json& pre_tokenizer, std::string_view text) {
  auto pt = tok::make_pre_tokenizer(pre_tokenizer, {"test", "pre_tokenizer"});
  std::vector<std::string> out;
  auto collect = [&](const tok::Piece& p) { out.emplace_back(p.text); };
  pt->pre_tokenize(tok::Piece{text, true}, tok::PieceSink(collect));
  return out;
}

TEST(PreTokenizers, CharacterClassSplitters) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces_of({{"type", "Whitespace"}}, "Hello, world!! x_1"),
            (V{"Hello", ",", "world", "!!", "x_1"}));
  EXPECT_EQ(pieces_of({{"type", "WhitespaceSplit"}}, " a\tb  c "), (V{"a", "b", "c"}));
  EXPECT_EQ(pieces_of({{"type", "Digits"}, {"individual_digits", true}}, "a12b3"),
            (V{"a", "1", "2", "b", "3"}));
  EXPECT_EQ(pieces_of({{"type", "Digits"}, {"individual_digits", false}}, "a12b3"),
            (V{"a", "12", "b", "3"}));
  EXPECT_EQ(pieces_of({{"type", "Punctuation"}, {"behavior", "MergedWithPrevious"}}, "hi!? yo."),
            (V{"hi!", "?", " yo."}));
  EXPECT_EQ(pieces_of({{"type", "BertPreTokenizer"}}, "Hi, you."), (V{"Hi", ",", "you", "."}));
}

TEST(PreTokenizers, ByteLevelAndSplitSequence) {
  using V = std::vector<std::string>;
  // GPT-2 regex pieces, mapped to the byte alphabet (space -> "Ġ").
  EXPECT_EQ(pieces_of({{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}},
                      "Hi there's"),
            (V{"\xC4\xA0Hi", "\xC4\xA0there", "'s"}));
  json split_then_bytes = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"String", "-"}}},
         {"behavior", "Removed"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_EQ(pieces_of(split_then_bytes, "a b-c"), (V{"a\xC4\xA0"
                                                     "b",
                                                     "c"}));
  json inverted = {{"type", "Split"},
                   {"pattern", {{"Regex", "[a-z]+"}}},
                   {"behavior", "Removed"},
                   {"invert", true}};
  EXPECT_EQ(pieces_of(inverted, "ab12cd"), (V{"ab", "cd"}));
}

TEST(PostProcessors, TemplateBertRoberta) {
  json j = char_tokenizer({"a", "[CLS]", "[SEP]"});
  j["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 2}}, {"cls", {"[CLS]", 1}}};
  EXPECT_EQ(build(j)->encode("aa", true), (Ids{1, 0, 0, 2}));
  EXPECT_EQ(build(j)->encode("aa", false), (Ids{0, 0}));
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", "[CLS]:0 $A:0 [SEP]:0 [SEP]:0"},
                         {"pair", "[CLS] $A [SEP] $B [SEP]"},
                         {"special_tokens",
                          {{"[CLS]", {{"id", "[CLS]"}, {"ids", {1}}, {"tokens", {"[CLS]"}}}},
                           {"[SEP]", {{"id", "[SEP]"}, {"ids", {2}}, {"tokens", {"[SEP]"}}}}}}};
  EXPECT_EQ(build(j)->encode("a", true), (Ids{1, 0, 2, 2}));
}

std::string run_decoder(const json& decoder, std::vector<std::string> tokens) {
  auto d = tok::make_decoder(decoder, {"test", "decoder"});
  tok::DecodeContext ctx;
  d->decode_chain(tokens, ctx);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(Decoders, HandDerivedOutputs) {
  EXPECT_EQ(run_decoder({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}},
                        {"un", "##believ", "##able", "!", "do", "n't"}),
            "unbelievable! don't");
  EXPECT_EQ(run_decoder({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "you</w>"}),
            "hello you");
  EXPECT_EQ(run_decoder(nullptr, {"a", "b"}), "a b");  // no decoder: joined with spaces
  // Strip without Fuse acts on every token.
  EXPECT_EQ(run_decoder({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}},
                        {" a ", "  b", "c"}),
            "a bc");
  EXPECT_EQ(run_decoder({{"type", "ByteFallback"}}, {"<0xE6>", "<0x97>", "<0xA5>", "x", "<0xFF>"}),
            "\xE6\x97\xA5x\xEF\xBF\xBD");
  EXPECT_EQ(run_decoder({{"type", "ByteLevel"}}, {"\xC4\xA0hi", "<|im_end|>"}), " hi<|im_end|>");
}

TEST(Tokenizer, TokenLookupsOnQwen3) {
  auto tok = golden_tokenizer("qwen3");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->token_to_id("<|im_start|>"), 151644);
  EXPECT_TRUE(tok->is_special(151644));
  EXPECT_FALSE(tok->is_special(151667));  // <think> is added but not special
  EXPECT_EQ(tok->id_to_token(151667), "<think>");
  EXPECT_EQ(tok->id_to_token(tok->vocab_size() + 5), "");
  EXPECT_FALSE(tok->token_to_id("no such token").has_value());
  EXPECT_FALSE(tok->is_special(-3));
}

TEST(Tokenizer, EncodeIsThreadSafe) {
  auto tok = golden_tokenizer("qwen3");
  ASSERT_TRUE(tok);
  std::vector<std::string> texts;
  for (const auto& g : goldens()["qwen3"]["encode"]) texts.push_back(g["text"]);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok->encode(t, true));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 50; ++round)
        for (size_t i = 0; i < texts.size(); ++i)
          mismatches[w] +=
              tok->encode(texts[(i + w) % texts.size()], true) != expected[(i + w) % texts.size()];
    });
  }
  for (auto& t : threads) t.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace pipeline_test
}  // namespace tandem::test
