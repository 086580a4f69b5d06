// BPE merging against a naive reference written from the definition: repeatedly merge the
// adjacent pair with the lowest merge rank (leftmost on ties) until none applies.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>

#include "tokenizer/bpe_model.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_support.h"

namespace tandem::test {
namespace bpe_model_test {

using nlohmann::json;

using RankMap = std::map<std::pair<std::string, std::string>, size_t>;

RankMap merge_ranks(const json& model) {
  RankMap rank;
  const json& merges = model["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    std::pair<std::string, std::string> p;
    if (merges[i].is_string()) {
      std::string s = merges[i];
      p = {s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)};
    } else {
      p = {merges[i][0], merges[i][1]};
    }
    rank[p] = i;  // a duplicated pair keeps its last rank (HF collects merges into a map)
  }
  return rank;
}

std::vector<int32_t> naive_bpe(const json& model, const RankMap& rank, const std::string& word) {
  std::vector<std::string> symbols;
  for (size_t i = 0; i < word.size();) {
    size_t begin = i;
    tok::next_char(word, i);
    symbols.push_back(word.substr(begin, i - begin));
  }
  while (symbols.size() > 1) {
    size_t best = SIZE_MAX, best_rank = SIZE_MAX;
    for (size_t k = 0; k + 1 < symbols.size(); ++k) {
      auto it = rank.find({symbols[k], symbols[k + 1]});
      if (it != rank.end() && it->second < best_rank) best = k, best_rank = it->second;
    }
    if (best == SIZE_MAX) break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + best + 1);
  }
  std::vector<int32_t> ids;
  for (const auto& s : symbols) ids.push_back(model["vocab"][s].get<int32_t>());
  return ids;
}

// Random words over the characters the merges use most, so long merge chains happen.
void check_against_naive(const json& tokenizer_json, int trials, uint32_t seed) {
  const json& model = tokenizer_json["model"];
  auto bpe = tok::BpeModel::from_json(model, {"test", "model"});
  std::vector<std::string> alphabet;
  for (size_t i = 0; i < model["merges"].size() && alphabet.size() < 24; ++i) {
    std::string left = model["merges"][i].is_string()
                           ? model["merges"][i].get<std::string>().substr(0, 2)
                           : model["merges"][i][0].get<std::string>();
    size_t k = 0;
    tok::next_char(left, k);
    std::string first = left.substr(0, k);
    if (std::find(alphabet.begin(), alphabet.end(), first) == alphabet.end())
      alphabet.push_back(first);
  }
  RankMap rank = merge_ranks(model);
  std::mt19937 rng(seed);
  for (int t = 0; t < trials; ++t) {
    std::string word;
    size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) word += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> got;
    bpe->merge_word(word, got);
    ASSERT_EQ(got, naive_bpe(model, rank, word)) << word;
    std::vector<int32_t> cached;
    bpe->tokenize(word, cached);  // through the cache, twice
    bpe->tokenize(word, cached);
    std::vector<int32_t> twice = got;
    twice.insert(twice.end(), got.begin(), got.end());
    ASSERT_EQ(cached, twice) << word;
  }
}

TEST(BpeModel, TinyBpeMatchesNaiveMerging) {
  std::ifstream in(tokenizer_path("tiny-bpe"));
  check_against_naive(json::parse(in), 400, 1);
}

TEST(BpeModel, SyntheticByteLevelMatchesNaiveMerging) {
  check_against_naive(json::parse(byte_level_tokenizer_json(4000)), 400, 2);
}

TEST(BpeModel, UnknownCharactersUseUnkFusedOrNot) {
  json model = {{"type", "BPE"},
                {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}}},
                {"merges", {"a b"}},
                {"unk_token", "<unk>"}};
  auto plain = tok::BpeModel::from_json(model, {"test", "model"});
  std::vector<int32_t> ids;
  plain->tokenize("xyab", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 0, 3}));
  model["fuse_unk"] = true;
  auto fused = tok::BpeModel::from_json(model, {"test", "model"});
  ids.clear();
  fused->tokenize("xyabz", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 3, 0}));
  model["unk_token"] = nullptr;  // no unk: HF drops the character
  auto dropping = tok::BpeModel::from_json(model, {"test", "model"});
  ids.clear();
  dropping->tokenize("xab", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{3}));
}

TEST(BpeModel, ByteFallbackAndIgnoreMerges) {
  json model = {{"type", "BPE"},
                {"vocab", {{"<0xC3>", 0}, {"<0xA9>", 1}, {"a", 2}, {"b", 3}, {"ab", 4}, {"ba", 5}}},
                {"merges", {"a b"}},
                {"byte_fallback", true}};
  auto bpe = tok::BpeModel::from_json(model, {"test", "model"});
  std::vector<int32_t> ids;
  bpe->tokenize("a\xC3\xA9", ids);  // "aé": é is not in the vocabulary
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 0, 1}));
  ids.clear();
  bpe->tokenize("ba", ids);  // no merge "b a": two symbols
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 2}));
  model["ignore_merges"] = true;  // a whole word in the vocabulary wins
  ids.clear();
  tok::BpeModel::from_json(model, {"test", "model"})->tokenize("ba", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{5}));
}

TEST(BpeModel, SubwordPrefixAndSuffix) {
  json model = {{"type", "BPE"},
                {"vocab", {{"a", 0}, {"##b", 1}, {"##c</w>", 2}, {"a##b", 3}, {"ab", 4}}},
                {"merges", {"a ##b"}},
                {"continuing_subword_prefix", "##"},
                {"end_of_word_suffix", "</w>"}};
  auto bpe = tok::BpeModel::from_json(model, {"test", "model"});
  std::vector<int32_t> ids;
  bpe->tokenize("abc", ids);  // a + ##b merge into "ab" (the prefix is dropped), then ##c</w>
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 2}));
}

}  // namespace bpe_model_test
}  // namespace tandem::test
