// A thinking model's delimiters as its tokens (issue 43): what the engine needs to follow a
// row through its thinking block without decoding text. Built once per served model and
// reasoning format (the server has the tokenizer and the format), shared by every request
// that thinks; immutable, so rows on the engine thread read it freely.
//
// The engine matches the delimiters on the tokens' bytes, not on token ids: a model may
// write "</think>" as one added token or as "</", "think", ">", and the server's parser,
// which reads the text, sees the same bytes either way. So the tables below say, for each
// place a row can be inside a delimiter, which tokens continue it and where they finish it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tandem {

struct ThinkingVocabParams {
  // token_bytes[id]: what token id writes, special tokens included (their content); its
  // size is the logits' width.
  std::vector<std::string> token_bytes;
  std::vector<int32_t> eos_ids;
  std::string start;  // opens the block ("<think>")
  std::string end;    // closes it ("</think>")
  // The tokens the engine writes itself when a budget runs out; their bytes end with `end`.
  std::vector<int32_t> forced_end;
  // Whitespace a row may write before opening its block (server/common/reasoning_parser.h).
  size_t max_space_before_start = 8;
};

class ThinkingVocab {
 public:
  // Throws tandem::Error when the delimiters are empty or the forced tokens do not spell
  // text that ends with `end`.
  explicit ThinkingVocab(ThinkingVocabParams params);

  int32_t num_tokens() const { return int32_t(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  const std::string& start() const { return start_; }
  const std::string& end() const { return end_; }
  const std::vector<int32_t>& forced_end() const { return forced_end_; }
  size_t max_space_before_start() const { return max_space_; }

  // Matching `end` in a byte stream: the state is how many bytes of it the stream ends with
  // (a KMP automaton); end().size() means it was just completed.
  uint32_t end_step(uint32_t state, uint8_t byte) const { return end_delta_[state][byte]; }

  // Tokens that are a non-empty prefix of start()[k:] (a row opening its block, k bytes in).
  struct Continue {
    int32_t token;
    uint32_t next;  // k after the token
  };
  const std::vector<Continue>& opening(uint32_t k) const { return opening_[k]; }
  // Tokens of whitespace only, at most max_space_before_start() bytes, with their length.
  const std::vector<std::pair<int32_t, uint32_t>>& spaces() const { return spaces_; }
  // Tokens that complete `end` from end-state j, and the offset in the token's bytes just
  // past it (what follows is the start of the answer).
  struct Completion {
    int32_t token;
    uint32_t tail;
  };
  const std::vector<Completion>& closing(uint32_t j) const { return closing_[j]; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_ids_;
  std::string start_, end_;
  std::vector<int32_t> forced_end_;
  size_t max_space_;
  std::vector<std::array<uint32_t, 256>> end_delta_;  // [end.size() + 1][byte]
  std::vector<std::vector<Continue>> opening_;        // [start.size()]
  std::vector<std::pair<int32_t, uint32_t>> spaces_;
  std::vector<std::vector<Completion>> closing_;  // [end.size()]
};

}  // namespace tandem
