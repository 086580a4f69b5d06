// A lower bound on the number of tokens a text becomes, from its length alone, where the
// tokenizer makes one safe: a prompt that cannot fit the context is refused before it is
// tokenized (tokenizing 15 MB costs seconds and hundreds of MB, and ends in that refusal).
//
// The bound is tokens ≥ ⌈bytes / L⌉ when every token stands for at most L bytes of input.
// That holds for BPE (each token is a vocabulary piece, an added token, or one unknown
// character; not for a *fused* unknown token, which swallows any run) when nothing before
// the model can delete input: every pre-tokenizer keeps every byte (ByteLevel, Metaspace,
// Split, Digits, Punctuation, UnicodeScripts; not Whitespace or Bert, which drop spaces)
// and every normalizer keeps the text at least as long (Prepend; Replace of a string by
// one no shorter), or shrinks it at most 4× (NFC, NFD, NFKC, NFKD, Lowercase: one code
// point of up to 4 bytes becomes at least one byte, so L is multiplied by 4). Strip,
// StripAccents, Bert, Precompiled and regex Replace can delete any amount: no bound, and
// such prompts are bounded by --max-body-bytes alone. L is the longest piece measured in
// input bytes (a ByteLevel piece has one character per byte).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace tandem::server {

class PromptBound {
 public:
  PromptBound() = default;  // no bound
  // From tokenizer.json (parsed) and the loaded tokenizer it describes.
  static PromptBound from_tokenizer(const nlohmann::json& tokenizer_json, const Tokenizer& tok);

  // The fewest tokens `bytes` bytes of text can become (0 when there is no bound).
  int64_t min_tokens(size_t bytes) const;
  // L × the normalizers' shrink factor; nullopt when there is no bound.
  std::optional<size_t> max_bytes_per_token() const { return max_bytes_per_token_; }

 private:
  std::optional<size_t> max_bytes_per_token_;
};

}  // namespace tandem::server
