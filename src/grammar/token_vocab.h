// A tokenizer's vocabulary as the grammar module sees it: the raw bytes each token id
// stands for, which ids are special (control tokens: never allowed by a grammar) and which
// end the output (EOS: allowed exactly when the grammar can end). Built once per
// tokenizer and shared by every grammar compiled for it; it does not depend on
// src/tokenizer (the engine decodes byte-level BPE token strings to bytes and passes them
// in).
//
// The ordinary tokens form a byte trie laid out in depth-first order, so a mask walk reads
// it front to back and skips a rejected subtree with one jump.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::grammar {

struct TokenVocabParams {
  // token_bytes[id]: the bytes of token id. Its size is the logits' width (a model's
  // vocabulary may be padded past the tokenizer's: those ids have no bytes and are never
  // allowed, nor is any other token with no bytes).
  std::vector<std::string> token_bytes;
  std::vector<uint8_t> is_special;  // same size (or empty: none special)
  std::vector<int32_t> eos_ids;     // the tokens that end the output
};

struct TrieNode {
  uint32_t skip;         // index of the next node outside this subtree
  uint32_t first_token;  // tokens ending here: sorted_tokens()[first_token, +num_tokens)
  uint16_t depth;        // bytes from the root (the root has depth 0)
  uint8_t byte;          // the byte that leads here from the parent
  uint8_t num_tokens;
};

class TokenVocab {
 public:
  explicit TokenVocab(TokenVocabParams params);

  int32_t num_tokens() const { return int32_t(bytes_.size()); }
  size_t num_mask_words() const { return (bytes_.size() + 31) / 32; }  // bitmask of 32-bit words
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  bool is_special(int32_t id) const { return special_[size_t(id)] != 0; }
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // Whether a grammar may ever allow id other than as EOS (bytes, not special).
  bool is_grammar_token(int32_t id) const { return !is_special(id) && !bytes(id).empty(); }

  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& sorted_tokens() const { return sorted_tokens_; }
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  void build_trie();

  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> eos_ids_;
  std::vector<TrieNode> trie_;          // trie_[0] is the root
  std::vector<int32_t> sorted_tokens_;  // grammar tokens in byte order
  size_t max_token_bytes_ = 0;
};

}  // namespace tandem::grammar
