// A tokenizer's vocabulary as the grammar module sees it: the raw bytes each token id
// stands for, which ids are special (control tokens: never allowed by a grammar) and which
// end the output (EOS: allowed exactly when the grammar can end). Built once per
// tokenizer and shared by every grammar compiled for it; it does not depend on
// src/tokenizer (the engine decodes byte-level BPE token strings to bytes and passes them
// in).
//
// The ordinary tokens form a byte trie laid out in depth-first order, so a mask walk reads
// it front to back and skips a rejected subtree with one jump. The few tokens longer than
// trie_depth bytes (runs of '=' or '_', long code fragments) stay out of it and are
// checked one by one: the trie's depth bounds how far any walk looks ahead, which lets
// masks be shared between states that differ only beyond it (Automaton::canonical).
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
  size_t trie_depth = 32;           // longer tokens are checked one by one
};

// 12 bytes: the mask walk streams the whole trie for states that allow most tokens.
struct TrieNode {
  uint32_t skip;  // index of the next node outside this subtree
  // The first token ending here; a node where none ends holds scratch_token(), a bit past
  // the vocabulary, so the mask walk can set a bit for every node without a branch.
  uint32_t token;
  uint16_t depth;      // bytes from the root (the root has depth 0)
  uint8_t byte;        // the byte that leads here from the parent
  uint8_t num_tokens;  // tokens ending here: sorted_tokens()[first_token(node), +num_tokens)
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
  // The bit trie nodes without a token set: the first bit of the word after the mask.
  uint32_t scratch_token() const { return uint32_t(32 * num_mask_words()); }
  const std::vector<int32_t>& sorted_tokens() const { return sorted_tokens_; }
  // The end of node's tokens in sorted_tokens(): its subtree's tokens are
  // [trie()[node].first_token, subtree_token_end(node)).
  uint32_t subtree_token_end(uint32_t node) const {
    uint32_t next = trie_[node].skip;
    return next < trie_.size() ? first_token_[next] : uint32_t(sorted_tokens_.size());
  }
  // The first token in node's subtree, as an index into sorted_tokens(); the path to node
  // is the first depth bytes of that token.
  uint32_t first_token(uint32_t node) const { return first_token_[node]; }
  // The longest token in the trie, in bytes.
  uint32_t trie_depth() const { return trie_depth_; }
  // Grammar tokens too long for the trie.
  const std::vector<int32_t>& long_tokens() const { return long_tokens_; }

 private:
  void build_trie(size_t max_depth);

  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> eos_ids_;
  std::vector<TrieNode> trie_;          // trie_[0] is the root
  std::vector<uint32_t> first_token_;   // per node
  std::vector<int32_t> sorted_tokens_;  // the trie's tokens in byte order
  std::vector<int32_t> long_tokens_;
  uint32_t trie_depth_ = 0;
};

}  // namespace tandem::grammar
