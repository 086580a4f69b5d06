// Tokenizers built from GGUF metadata. Against llama.cpp's own vocabulary files and their
// golden ids (test-tokenizer-0's .inp/.out pairs, made with HF's tokenizers; fetched by
// scripts/bootstrap.d/30-gguf-vocabs.sh): every case exact, for each vocabulary type tandem
// reads — llama-spm (Llama 2), phi-3 (SentencePiece, special tokens with rstrip),
// llama-bpe (Llama 3), qwen2, gpt-2. Against the oracle's GGUF (the tiny model's byte-level
// vocabulary written by llama.cpp's conventions): the same ids as its tokenizer.json on every
// tokenizer_golden.json string, and the chat template and special tokens of the file.
//
// Without the fetched files the vocabulary tests skip with a message, except under
// scripts/test.sh and CI (TANDEM_REQUIRE_FETCHED=1), where a missing file fails.
//
// And the other way: a folder's tokenizer written as GGUF metadata (gguf_vocab_writer.h)
// reads back to the same ids.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>
#include "core/error.h"
#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/gguf_vocab_writer.h"
#include "tokenizer_test_support.h"

namespace tandem::test {
namespace gguf_tokenizer_test {

namespace fs = std::filesystem;

fs::path vocab_file(const std::string& name) { return cache_dir() / "gguf-vocabs" / name; }

bool require_fetched() {
  const char* v = std::getenv("TANDEM_REQUIRE_FETCHED");
  return v && std::string(v) == "1";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// test-tokenizer-0's format: inputs separated by "\n__ggml_vocab_test__\n", one line of
// space-separated ids per input.
std::vector<VocabCase> read_cases(const fs::path& gguf) {
  const std::string raw = read_file(gguf.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(read_file(gguf.string() + ".out"));
  std::vector<VocabCase> cases;
  std::string line;
  for (size_t i = 0; std::getline(out, line); i++) {
    if (i >= inputs.size()) break;
    VocabCase c{inputs[i], {}};
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), inputs.size()) << gguf;
  return cases;
}

class GgufVocabGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = vocab_file("ggml-vocab-" + GetParam() + ".gguf");
    if (fs::exists(path_)) return;
    const std::string why = path_.string() + " is missing: run scripts/bootstrap.d/30-gguf-vocabs.sh";
    if (require_fetched()) FAIL() << why;
    GTEST_SKIP() << why;
  }
  fs::path path_;
};

TEST_P(GgufVocabGolden, EveryCaseExact) {
  auto tok = Tokenizer::load(path_);
  const std::vector<VocabCase> cases = read_cases(path_);
  ASSERT_GE(cases.size(), 30u);
  int wrong = 0;
  for (const VocabCase& c : cases) {
    std::vector<int32_t> got = tok->encode(c.text, /*add_special_tokens=*/false);
    EXPECT_EQ(got, c.ids) << "'" << c.text << "'";
    wrong += got != c.ids;
  }
  EXPECT_EQ(wrong, 0) << GetParam();
}

// Byte-level vocabularies decode every input to itself (SentencePiece's drop the prepended
// space and Qwen2's normalize to NFC, as HF's do, so they are not in this list).
class GgufByteLevelVocab : public GgufVocabGolden {};

TEST_P(GgufByteLevelVocab, DecodeGivesTheTextBack) {
  auto tok = Tokenizer::load(path_);
  for (const VocabCase& c : read_cases(path_)) EXPECT_EQ(tok->decode(c.ids, false), c.text);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GgufVocabGolden,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });
INSTANTIATE_TEST_SUITE_P(Vocabularies, GgufByteLevelVocab, ::testing::Values("llama-bpe", "gpt-2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

TEST(GgufTokenizer, SpecialTokensAndBos) {
  for (const char* v : {"llama-spm", "llama-bpe", "qwen2"}) {
    fs::path p = vocab_file(std::string("ggml-vocab-") + v + ".gguf");
    if (!fs::exists(p)) {
      if (require_fetched()) FAIL() << p << " is missing";
      GTEST_SKIP() << p << " is missing: run scripts/bootstrap.d/30-gguf-vocabs.sh";
    }
    auto tok = Tokenizer::load(p);
    std::vector<int32_t> plain = tok->encode("Hello", false), special = tok->encode("Hello", true);
    if (std::string(v) == "qwen2") {
      EXPECT_EQ(special, plain);  // Qwen adds no BOS
      EXPECT_EQ(tok->encode("<|im_start|>user", false).front(), *tok->token_to_id("<|im_start|>"));
      EXPECT_TRUE(tok->is_special(*tok->token_to_id("<|im_end|>")));
    } else {
      const int32_t bos = std::string(v) == "llama-spm" ? 1 : 128000;
      ASSERT_EQ(special.size(), plain.size() + 1) << v;
      EXPECT_EQ(special.front(), bos) << v;
      EXPECT_TRUE(tok->is_special(bos));
    }
  }
}

// The fuzz seeds' tiny vocabularies, worked by hand. SentencePiece: "ab" is "▁ab" after the
// prepended space; "▁a" (score -7) outranks "ab" (-8), so ▁a then b; "A" has no piece and
// falls back to its byte <0x41>. Byte-level BPE: "ab a" splits into "ab" and "Ġa", both merged.
TEST(GgufTokenizer, TinyVocabulariesByHand) {
  const fs::path seeds = test_data().parent_path() / "fuzz" / "corpus" / "gguf";
  auto spm = Tokenizer::load(seeds / "seed2.gguf");
  EXPECT_EQ(spm->encode("ab", false), (std::vector<int32_t>{7, 6}));
  EXPECT_EQ(spm->encode("A", false), (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(spm->encode("ab", true), (std::vector<int32_t>{1, 7, 6}));  // BOS by default
  EXPECT_EQ(spm->decode(std::vector<int32_t>{1, 7, 6}, true), "ab");
  auto bpe = Tokenizer::load(seeds / "seed1.gguf");
  EXPECT_EQ(bpe->encode("ab a", false), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(bpe->encode("b<|end|>", false), (std::vector<int32_t>{1, 6}));
  EXPECT_EQ(bpe->encode("ab", true), (std::vector<int32_t>{3}));  // no BOS asked
  EXPECT_EQ(*TokenizerConfig::load(seeds / "seed1.gguf").chat_template, "{{ messages }}");
}

// Vocabularies tandem cannot read, or that contradict themselves, are refused by key.
TEST(GgufTokenizer, RefusalsNameTheKey) {
  auto error_of = [](const std::function<void(GgufWriter&)>& fill) -> std::string {
    GgufWriter w;
    fill(w);
    try {
      tokenizer_from_gguf(GgufFile::from_bytes(w.bytes(), "v.gguf")->metadata());
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto base = [](GgufWriter& w, const char* model) {
    w.add_string("tokenizer.ggml.model", model);
    w.add_strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
  };
  EXPECT_NE(error_of([&](GgufWriter& w) { base(w, "bert"); }).find("'tokenizer.ggml.model' is 'bert'"), std::string::npos);
  EXPECT_NE(error_of([&](GgufWriter& w) {
              base(w, "gpt2");
              w.add_string("tokenizer.ggml.pre", "chameleon");
              w.add_strings("tokenizer.ggml.merges", {"a b"});
            }).find("'tokenizer.ggml.pre' is 'chameleon'"), std::string::npos);
  EXPECT_NE(error_of([&](GgufWriter& w) {
              w.add_string("tokenizer.ggml.model", "llama");
              w.add_strings("tokenizer.ggml.tokens", {"a", "a"});
            }).find("token 'a' appears twice"), std::string::npos);
  EXPECT_NE(error_of([&](GgufWriter& w) {
              base(w, "llama");
              w.add_f32s("tokenizer.ggml.scores", {0.f});
            }).find("has 1 scores for 3 tokens"), std::string::npos);
  EXPECT_NE(error_of([&](GgufWriter& w) {
              base(w, "gpt2");
              w.add_strings("tokenizer.ggml.merges", {"ab"});
            }).find("'tokenizer.ggml.merges'[0] 'ab' is not two tokens"), std::string::npos);
  EXPECT_NE(error_of([&](GgufWriter& w) {
              base(w, "gpt2");
              w.add_strings("tokenizer.ggml.merges", {});
              w.add_bool("tokenizer.ggml.add_bos_token", true);
            }).find("add_bos_token is true, but no bos_token_id"), std::string::npos);
  EXPECT_NE(error_of([&](GgufWriter& w) { w.add_string("tokenizer.ggml.model", "gpt2"); })
                .find("'tokenizer.ggml.tokens' is missing"), std::string::npos);
}

fs::path oracle_gguf() { return test_data() / "oracle" / "gguf" / "llama-F32.gguf"; }

TEST(GgufTokenizer, OracleFileMatchesItsTokenizerJson) {
  auto gguf = Tokenizer::load(oracle_gguf());
  auto hf = golden_tokenizer("tiny-bpe");
  ASSERT_TRUE(hf);
  EXPECT_EQ(gguf->vocab_size(), 512);
  for (const auto& g : goldens()["tiny-bpe"]["encode"]) {
    const std::string text = g["text"];
    EXPECT_EQ(gguf->encode(text, false), g["ids"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(gguf->encode(text, true), hf->encode(text, true)) << text;
    EXPECT_EQ(gguf->decode(g["ids"].get<std::vector<int32_t>>(), false), g["decoded"].get<std::string>());
  }
  EXPECT_EQ(gguf->token_bytes(), hf->token_bytes());
}

TEST(GgufTokenizer, ConfigFromTheFile) {
  TokenizerConfig c = TokenizerConfig::load(oracle_gguf());
  TokenizerConfig hf = TokenizerConfig::load(test_data() / "oracle" / "llama");
  ASSERT_TRUE(c.chat_template);
  EXPECT_EQ(*c.chat_template, *hf.chat_template);
  EXPECT_EQ(c.eos_token, "<|im_end|>");
  EXPECT_EQ(c.bos_token, "<|endoftext|>");
  EXPECT_EQ(c.add_bos_token, false);
}

// A folder's tokenizer written as GGUF metadata (gguf_vocab_writer.h) and read back as a GGUF
// vocabulary (gguf_tokenizer.h) encodes every tokenizer_golden.json string to the golden ids,
// with and without special tokens: the tiny oracle tokenizer (GPT-2 split), Llama 3.1's
// (llama-bpe, BOS from the post-processor) and Qwen3's (qwen2 split). The ids past the
// vocabulary are padded as convert_hf_to_gguf.py pads them; vocabularies llama.cpp's gpt2 model
// cannot hold are refused by name.

namespace fs = std::filesystem;
using json = nlohmann::json;

std::shared_ptr<const GgufFile> vocab_file(const fs::path& dir, int vocab_size) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  add_gguf_vocab(w, dir, json{{"vocab_size", vocab_size}});
  return GgufFile::from_bytes(w.bytes(), (dir / "vocab.gguf").string());
}

class GgufVocabWriter : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVocabWriter, GoldenIdsThroughTheFile) {
  auto folder = golden_tokenizer(GetParam());
  ASSERT_TRUE(folder);
  auto file = vocab_file(tokenizer_path(GetParam()).parent_path(), folder->vocab_size());
  auto tok = tokenizer_from_gguf(file->metadata());
  EXPECT_EQ(tok->vocab_size(), folder->vocab_size());
  int checked = 0;
  for (const json& c : goldens()[GetParam()]["encode"]) {
    const std::string text = c["text"];
    EXPECT_EQ(tok->encode(text, false), c["ids"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tok->encode(text, true), c["ids_with_special"].get<std::vector<int32_t>>()) << text;
    checked++;
  }
  EXPECT_GT(checked, 10);
  const TokenizerConfig from_file = tokenizer_config_from_gguf(file->metadata());
  const TokenizerConfig from_folder =
      TokenizerConfig::load(tokenizer_path(GetParam()).parent_path());
  EXPECT_EQ(from_file.eos_token, from_folder.eos_token);
  EXPECT_EQ(from_file.chat_template, from_folder.chat_template);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GgufVocabWriter,
                         ::testing::Values("tiny-bpe", "llama3_1", "qwen3"), [](const auto& info) {
                           return info.param == "tiny-bpe" ? std::string("tiny_bpe") : info.param;
                         });

TEST(GgufVocabWriterPadding, IdsUpToVocabSizeAreUnused) {
  auto file = vocab_file(tokenizer_path("tiny-bpe").parent_path(), 520);
  const GgufMetadata& md = file->metadata();
  auto tokens = md.find("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  auto tok = tokenizer_from_gguf(md);
  EXPECT_EQ(tok->vocab_size(), 520);
  EXPECT_EQ(tok->id_to_token(515), "[PAD515]");
  EXPECT_EQ(tok->id_to_token(2), "<|im_end|>");
  EXPECT_EQ(md.get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(md.get_string("tokenizer.ggml.model"), "gpt2");
}

class GgufVocabWriterRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem-vocab-writer-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ifstream in(tokenizer_path("tiny-bpe"));
    doc_ = json::parse(in);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string error_for(const json& doc) {
    std::ofstream(dir_ / "tokenizer.json") << doc.dump();
    try {
      vocab_file(dir_, 512);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
  json doc_;
};

TEST_F(GgufVocabWriterRefusal, NamesWhatItCannotWrite) {
  json spm = doc_;
  spm["model"]["byte_fallback"] = true;
  EXPECT_NE(error_for(spm).find("with byte fallback"), std::string::npos);
  json unigram = doc_;
  unigram["model"]["type"] = "Unigram";
  EXPECT_NE(error_for(unigram).find("a Unigram model"), std::string::npos);
  json split = doc_;
  split["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers",
                             {{{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}},
                              {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  EXPECT_NE(error_for(split).find("none llama.cpp names"), std::string::npos);
  EXPECT_EQ(error_for(doc_), "");
}

}  // namespace gguf_tokenizer_test
}  // namespace tandem::test
