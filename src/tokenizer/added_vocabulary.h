// Added tokens (HF AddedVocabulary): strings such as "<|im_start|>" that are cut out of the
// input before normalization and pre-tokenization and map straight to their ids. Matching
// is leftmost-longest (HF's Aho-Corasick LeftmostLongest). Tokens with normalized=false
// are found in the raw input; those with normalized=true in each normalized stretch, spelled
// as the normalizer spells them. single_word, lstrip and rstrip follow HF's find_matches.
#pragma once

#include <bitset>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_cache.h"
#include "tokenizer/json_fields.h"

namespace tandem::tok {

class Normalizer;
class BpeModel;

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  // What decoding yields: the content, or its normalized spelling for normalized tokens
  // (HF >= 0.23 decodes those so, which lets byte-level normalizers round-trip).
  std::string decoded;
};

// Leftmost-longest matching over a set of strings, as a byte trie.
class TokenMatcher {
 public:
  void add(std::string_view pattern, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // The longest pattern that starts at text[pos]: its length and value.
  std::optional<std::pair<size_t, int32_t>> longest_at(std::string_view text, size_t pos) const;
  // The first position >= pos where some pattern could start (text.size() if none).
  size_t next_candidate(std::string_view text, size_t pos) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t value = -1;                                       // -1: no pattern ends here
  };
  int32_t child(int32_t node, unsigned char b) const;
  std::vector<Node> nodes_{Node{}};
  std::bitset<256> first_bytes_;
  std::string first_byte_list_;  // the distinct first bytes, for a fast scan when few
};

// A stretch of text after splitting on added tokens: plain text, or one added token.
struct TextSection {
  size_t begin;
  size_t end;
  const AddedToken* token;  // nullptr for plain text
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // tokenizer.json's "added_tokens". Ids come from the model's vocabulary when it has the
  // content (HF's rule), else from the file.
  AddedVocabulary(const json& added_tokens, const BpeModel& model, const Normalizer* normalizer,
                  const LoadContext& ctx);

  // Splits text on the non-normalized tokens (`normalized_set` false; text is the raw input)
  // or on the normalized ones (true; text is normalized). Empty stretches are left out.
  // `split_special`: special tokens are not cut out but stay text (HF's
  // split_special_tokens: a match of a special token is dropped, not retried shorter).
  void split(std::string_view text, bool normalized_set, std::vector<TextSection>& out,
             bool split_special = false) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> index_by_id_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> index_by_content_;
  TokenMatcher raw_;         // values index tokens_
  TokenMatcher normalized_;  // values index tokens_
};

}  // namespace tandem::tok
