// Real vocabularies for the token-level tests: the Qwen3 tokenizer (fetched by
// scripts/bootstrap.sh into .cache/tokenizers/qwen3), its byte-level tokens decoded to raw
// bytes the way the engine will pass them to the grammar module.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>

#include "grammar/token_vocab.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace tandem::grammar::test {

inline std::filesystem::path qwen3_tokenizer_path() {
  std::filesystem::path cache =
      std::getenv("TANDEM_CACHE") && *std::getenv("TANDEM_CACHE")
          ? std::filesystem::path(std::getenv("TANDEM_CACHE"))
          : std::filesystem::path(TANDEM_TEST_DATA).parent_path().parent_path() / ".cache";
  return cache / "tokenizers" / "qwen3" / "tokenizer.json";
}

// The vocabulary of a tokenizer, padded to num_logits ids (a model's vocabulary is wider
// than its tokenizer's); EOS: <|im_end|> and <|endoftext|>.
inline TokenVocabParams vocab_params(const Tokenizer& tok, int num_logits) {
  TokenVocabParams p;
  p.token_bytes.resize(size_t(num_logits));
  p.is_special.assign(size_t(num_logits), 0);
  for (int32_t id = 0; id < tok.vocab_size() && id < num_logits; ++id) {
    tok::append_token_bytes(p.token_bytes[size_t(id)], tok.id_to_token(id));
    p.is_special[size_t(id)] = tok.is_special(id);
  }
  for (const char* eos : {"<|im_end|>", "<|endoftext|>"})
    if (auto id = tok.token_to_id(eos)) p.eos_ids.push_back(*id);
  return p;
}

inline std::shared_ptr<const TokenVocab> qwen3_vocab() {
  static std::shared_ptr<const TokenVocab> vocab = []() -> std::shared_ptr<const TokenVocab> {
    std::filesystem::path path = qwen3_tokenizer_path();
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << path << " is missing: run scripts/bootstrap.sh to fetch the tokenizers";
      return nullptr;
    }
    auto tok = Tokenizer::load(path);
    return std::make_shared<const TokenVocab>(vocab_params(*tok, 151936));
  }();
  return vocab;
}

// A small vocabulary for brute-force checks: every single byte, `num_sampled` Qwen3 tokens
// picked at random, a special token and EOS.
inline std::shared_ptr<const TokenVocab> small_vocab(size_t num_sampled, uint32_t seed) {
  const TokenVocab& full = *qwen3_vocab();
  TokenVocabParams p;
  for (int b = 0; b < 256; ++b) p.token_bytes.push_back(std::string(1, char(b)));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, full.num_tokens() - 1);
  while (p.token_bytes.size() < 256 + num_sampled) {
    int32_t id = pick(rng);
    if (full.is_grammar_token(id)) p.token_bytes.push_back(full.bytes(id));
  }
  p.token_bytes.push_back("{\"");  // a duplicate of a sampled token's bytes, most likely
  p.token_bytes.push_back("<|im_end|>");
  p.token_bytes.push_back("<|tool|>");
  p.is_special.assign(p.token_bytes.size(), 0);
  p.is_special[p.token_bytes.size() - 1] = p.is_special[p.token_bytes.size() - 2] = 1;
  p.eos_ids = {int32_t(p.token_bytes.size() - 2)};
  return std::make_shared<const TokenVocab>(std::move(p));
}

}  // namespace tandem::grammar::test
