// A synthetic byte-level BPE tokenizer.json for random-weight benchmark models.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

std::string byte_level_tokenizer_json(int vocab_size) {
  using nlohmann::json;
  static const char* kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  constexpr int kNumSpecials = 3;
  if (vocab_size < kNumSpecials + 256)
    fail("byte_level_tokenizer_json: vocab_size {} < {} (3 special + 256 byte tokens)", vocab_size,
         kNumSpecials + 256);
  json vocab = json::object();
  json added = json::array();
  for (int id = 0; id < kNumSpecials; ++id) {
    vocab[kSpecials[id]] = id;
    added.push_back({{"id", id},
                     {"content", kSpecials[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  auto spell = [](std::string_view raw) {
    std::string s;
    tok::append_byte_level(s, raw);
    return s;
  };
  for (int b = 0; b < 256; ++b)
    vocab[spell(std::string(1, static_cast<char>(b)))] = kNumSpecials + b;
  // Fill the rest with merges over frequent English letters, level by level (2 letters, then
  // 3, ...): every token's left part exists before it, so the merges form a valid BPE and
  // prose encodes to a realistic few characters per token.
  const std::string alphabet = " etaoinshrdlucmfwypvbgkjqxz";
  json merges = json::array();
  int next_id = kNumSpecials + 256;
  std::vector<std::string> level;
  for (char c : alphabet) level.emplace_back(1, c);
  while (next_id < vocab_size) {
    std::vector<std::string> longer;
    for (const std::string& left : level) {
      for (char c : alphabet) {
        if (next_id >= vocab_size) break;
        std::string token = left + c;
        vocab[spell(token)] = next_id++;
        merges.push_back(json::array({spell(left), spell(std::string(1, c))}));
        longer.push_back(std::move(token));
      }
    }
    level = std::move(longer);
  }
  json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", true}};
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}};
  json j = {{"version", "1.0"},          {"truncation", nullptr}, {"padding", nullptr},
            {"added_tokens", added},     {"normalizer", nullptr}, {"pre_tokenizer", byte_level},
            {"post_processor", nullptr}, {"decoder", byte_level}, {"model", model}};
  return j.dump();
}

}  // namespace tandem
