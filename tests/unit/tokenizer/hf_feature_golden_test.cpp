// Hugging Face `tokenizers` 0.23.2 outputs for features the four main goldens do not reach
// (tests/data/tokenizer/hf_feature_goldens.json, made by make_feature_goldens.py beside it):
// small synthetic tokenizer.json files covering Metaspace prepend schemes, legacy
// SentencePiece normalizers, every split behavior, normalizers, added-token flags,
// post-processors and decoders; plus extra texts and random-id decodes for the real
// tokenizers. Streaming decoding must reproduce every decode as well.
#include <gtest/gtest.h>

#include <fstream>

#include "tokenizer_test_support.h"

namespace tandem::test {
namespace hf_feature_golden_test {

using nlohmann::json;

const json& feature_goldens() {
  static const json j = [] {
    std::ifstream in(test_data() / "tokenizer" / "hf_feature_goldens.json");
    return json::parse(in);
  }();
  return j;
}

std::string stream(const std::shared_ptr<const Tokenizer>& tok, const std::vector<int32_t>& ids,
                   bool skip) {
  IncrementalDecoder dec(tok, skip);
  std::string out;
  for (int32_t id : ids) out += dec.push(id);
  return out + dec.finish();
}

// HF panics in a few decodes (Strip with stop > 0 on empty text): those are stored as null.
void check_decode(const std::shared_ptr<const Tokenizer>& tok, const std::vector<int32_t>& ids,
                  bool skip, const json& expected, const std::string& what) {
  std::string got = tok->decode(ids, skip);
  if (!expected.is_null()) {
    EXPECT_EQ(got, expected.get<std::string>()) << what;
  }
  EXPECT_EQ(stream(tok, ids, skip), got) << what << " (streaming)";
}

void check_all(const std::shared_ptr<const Tokenizer>& tok, const json& g,
               const std::string& name) {
  for (const json& c : g["cases"]) {
    std::string text = c["text"];
    std::string what = name + ": '" + text + "'";
    auto ids = c["ids"].get<std::vector<int32_t>>();
    auto with_special = c["ids_with_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text, false), ids) << what;
    EXPECT_EQ(tok->encode(text, true), with_special) << what << " (with special tokens)";
    check_decode(tok, ids, false, c["decoded"], what);
    check_decode(tok, with_special, true, c["decoded_skip"], what + " (skipping special)");
  }
  for (const json& d : g["decode"]) {
    auto ids = d["ids"].get<std::vector<int32_t>>();
    std::string what = name + ": decode " + d["ids"].dump();
    check_decode(tok, ids, false, d["decoded"], what);
    check_decode(tok, ids, true, d["decoded_skip"], what + " (skipping special)");
  }
}

TEST(HfFeatureGoldens, SyntheticTokenizers) {
  const json& synthetic = feature_goldens()["synthetic"];
  ASSERT_GE(synthetic.size(), 14u);
  for (const auto& [name, g] : synthetic.items()) {
    SCOPED_TRACE(name);
    auto tok = Tokenizer::from_json_text(g["tokenizer"].dump(), name);
    check_all(tok, g, name);
  }
}

TEST(HfFeatureGoldens, RealTokenizersOnExtraTexts) {
  for (const auto& [key, g] : feature_goldens()["real"].items()) {
    SCOPED_TRACE(key);
    auto tok = golden_tokenizer(key);
    ASSERT_TRUE(tok);
    check_all(tok, g, key);
  }
}

}  // namespace hf_feature_golden_test
}  // namespace tandem::test
