// Unsupported or malformed tokenizer.json components fail at load with a message naming the
// file, the component and the offending type or field.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer_test_support.h"

namespace tandem::test {
namespace load_error_test {

using nlohmann::json;

json minimal() {
  return bare_tokenizer({{"a", 0}, {"b", 1}, {"ab", 2}}, json::array({"a b"}));
}

// Writes j to a temporary tokenizer.json, loads it, and returns the error message.
std::string load_error(const json& j, std::filesystem::path* written = nullptr) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tandem_tok_err_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path file = dir / "tokenizer.json";
  std::ofstream(file) << j.dump();
  if (written) *written = file;
  try {
    Tokenizer::load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "loading succeeded: " << j.dump().substr(0, 200);
  return "";
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> words) {
  for (const char* w : words)
    EXPECT_NE(message.find(w), std::string::npos) << message << " lacks " << w;
}

TEST(LoadErrors, MinimalTokenizerLoads) {
  auto tok = Tokenizer::from_json_text(minimal().dump());
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{2}));
}

TEST(LoadErrors, UnknownComponentTypesNameTheComponent) {
  std::filesystem::path file;
  json j = minimal();
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  expect_mentions(load_error(j, &file), {"normalizer", "Precompiled", "tokenizer.json"});
  j = minimal();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "UnicodeScripts"}}}}};
  expect_mentions(load_error(j), {"pre_tokenizer", "UnicodeScripts", "tokenizer.json"});
  j = minimal();
  j["decoder"] = {{"type", "CTC"}, {"pad_token", "<pad>"}};
  expect_mentions(load_error(j), {"decoder", "CTC", "tokenizer.json"});
  j = minimal();
  j["model"] = {{"type", "Unigram"}, {"vocab", json::array()}};
  expect_mentions(load_error(j), {"model", "Unigram", "tokenizer.json"});
  j = minimal();
  j["post_processor"] = {{"type", "Mystery"}};
  expect_mentions(load_error(j), {"post_processor", "Mystery"});
  std::filesystem::remove_all(file.parent_path());
}

TEST(LoadErrors, MalformedPiecesNameTheField) {
  json j = minimal();
  j["model"]["merges"] = {"a c"};
  expect_mentions(load_error(j), {"model", "'c'", "not in the vocabulary"});
  j = minimal();
  j["model"]["merges"] = {"a b c"};
  expect_mentions(load_error(j), {"model", "merges[0]"});
  j = minimal();
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(oops"}}}, {"behavior", "Isolated"}};
  expect_mentions(load_error(j), {"pre_tokenizer", "(oops"});
  j = minimal();
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}};
  expect_mentions(load_error(j), {"pre_tokenizer", "Sideways"});
  j = minimal();
  j["model"]["vocab"]["c"] = "three";
  expect_mentions(load_error(j), {"model", "vocab['c']", "integer"});
  j = minimal();
  j["model"]["merges"] = {{"a", "b", "c"}};
  expect_mentions(load_error(j), {"model", "merges[0]"});
  j = minimal();
  j["model"].erase("merges");
  expect_mentions(load_error(j), {"model", "merges"});
  j = minimal();
  j["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}};
  expect_mentions(load_error(j), {"decoder", "content"});
}

// The streaming reader keeps everything but model.vocab/merges as an ordinary DOM.
TEST(TokenizerJsonReader, DomMatchesAPlainParseOutsideVocabAndMerges) {
  std::ifstream in(tokenizer_path("tiny-bpe"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  json plain = json::parse(text);
  tok::TokenizerJson read = tok::read_tokenizer_json(text, "tiny");
  EXPECT_EQ(read.source.vocab.size(), plain["model"]["vocab"].size());
  ASSERT_EQ(read.source.merges.size(), plain["model"]["merges"].size());
  EXPECT_EQ(read.source.merges[7].first, plain["model"]["merges"][7][0]);
  EXPECT_EQ(read.source.merges[7].second, plain["model"]["merges"][7][1]);
  plain["model"]["vocab"] = nullptr;
  plain["model"]["merges"] = nullptr;
  EXPECT_EQ(read.doc, plain);
}

TEST(LoadErrors, MissingFileAndBadJson) {
  try {
    Tokenizer::load("/nonexistent/dir/tokenizer.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    expect_mentions(e.what(), {"/nonexistent/dir/tokenizer.json"});
  }
  EXPECT_THROW(Tokenizer::from_json_text("{not json", "x.json"), Error);
  EXPECT_THROW(Tokenizer::from_json_text("[1, 2]", "x.json"), Error);
}

}  // namespace load_error_test
}  // namespace tandem::test
