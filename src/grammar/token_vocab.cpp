#include "grammar/token_vocab.h"

#include <algorithm>

#include "core/error.h"

namespace tandem::grammar {

TokenVocab::TokenVocab(TokenVocabParams params)
    : bytes_(std::move(params.token_bytes)),
      special_(std::move(params.is_special)),
      eos_ids_(std::move(params.eos_ids)) {
  if (special_.empty()) special_.assign(bytes_.size(), 0);
  if (special_.size() != bytes_.size())
    fail("token vocabulary: {} special flags for {} tokens", special_.size(), bytes_.size());
  for (int32_t id : eos_ids_)
    if (id < 0 || size_t(id) >= bytes_.size())
      fail("token vocabulary: EOS id {} outside [0, {})", id, bytes_.size());
  std::sort(eos_ids_.begin(), eos_ids_.end());
  eos_ids_.erase(std::unique(eos_ids_.begin(), eos_ids_.end()), eos_ids_.end());
  build_trie(params.trie_depth);
}

bool TokenVocab::is_eos(int32_t id) const {
  return std::binary_search(eos_ids_.begin(), eos_ids_.end(), id);
}

void TokenVocab::build_trie(size_t max_depth) {
  if (max_depth == 0 || max_depth > 0xFFFF) fail("token vocabulary: trie depth {}", max_depth);
  for (int32_t id = 0; id < num_tokens(); ++id) {
    if (!is_grammar_token(id) || is_eos(id)) continue;
    (bytes(id).size() > max_depth ? long_tokens_ : sorted_tokens_).push_back(id);
  }
  std::stable_sort(sorted_tokens_.begin(), sorted_tokens_.end(),
                   [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  trie_.push_back(TrieNode{0, scratch_token(), 0, 0, 0});
  first_token_.push_back(0);
  std::vector<uint32_t> path = {0};  // open nodes, root first
  std::string_view prev;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      trie_[path.back()].skip = uint32_t(trie_.size());
      path.pop_back();
    }
  };
  for (size_t i = 0; i < sorted_tokens_.size(); ++i) {
    std::string_view s = bytes_[size_t(sorted_tokens_[i])];
    trie_depth_ = std::max(trie_depth_, uint32_t(s.size()));
    size_t common = 0;
    while (common < std::min(prev.size(), s.size()) && prev[common] == s[common]) ++common;
    if (common == s.size() && common == prev.size() && i > 0) {
      TrieNode& same = trie_[path.back()];  // a second id with the same bytes
      TANDEM_CHECK(same.num_tokens < 255, "more than 255 tokens share the bytes of {}",
                   sorted_tokens_[i]);
      ++same.num_tokens;
      continue;
    }
    close_to(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(uint32_t(trie_.size()));
      trie_.push_back(TrieNode{0, scratch_token(), uint16_t(d + 1), uint8_t(s[d]), 0});
      first_token_.push_back(uint32_t(i));
    }
    trie_.back().token = uint32_t(sorted_tokens_[i]);
    trie_.back().num_tokens = 1;
    prev = s;
  }
  close_to(0);
  trie_[0].skip = uint32_t(trie_.size());
}

}  // namespace tandem::grammar
