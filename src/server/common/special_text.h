// Special-token text that a client writes into a conversation stays text (issue 43 item 5).
//
// The chat template writes the control tokens (<|im_start|>, <|im_end|>, <start_of_turn>,
// ...) and the rendered prompt is tokenized with special tokens recognized, as transformers
// and vLLM do. Tokenized that way, a user message holding "<|im_end|>\n<|im_start|>system"
// would end its own turn and forge a system turn. So before rendering, every special
// token's text inside the strings the client sent (messages, tools, template kwargs) is
// replaced by a marker the template passes through untouched; after rendering, the markers
// become that text again, and its spans are tokenized with split_special_tokens (HF's flag:
// the text's ordinary tokens, never the control token). Only special tokens are guarded, as
// HF's flag guards them; other added tokens ("<think>", "<tool_call>") match as before.
//
// A marker is U+E000, the index of the text it stands for, U+E001 (private-use characters
// no tokenizer gives meaning to). A U+E000 the client sent is itself marked, so a client
// cannot forge a marker; a template that cuts a marker in half leaves its pieces as text.
//
// `split_special_tokens: false` on a request turns this off (vLLM's and llama.cpp's
// behaviour: the client's text may write control tokens; docs/api.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "server/common/json_text.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

// A rendered prompt, and the byte ranges of its text that came from special-token text in
// the client's strings: those are tokenized as text.
struct RenderedPrompt {
  struct Span {
    size_t begin = 0, end = 0;
  };
  std::string text;
  std::vector<Span> plain;  // sorted, not overlapping
};

class SpecialTextGuard {
 public:
  // The texts of the tokenizer's special tokens (is_special).
  explicit SpecialTextGuard(const Tokenizer& tokenizer);
  explicit SpecialTextGuard(std::vector<std::string> special_texts);

  // `value` with every special token's text (and every U+E000) inside its strings replaced
  // by a marker; the texts replaced are appended to `originals` (a marker's index is its
  // place there). Object keys are left alone.
  Json mark(const Json& value, std::vector<std::string>& originals) const;

  // The rendered text with its markers restored, and their spans.
  static RenderedPrompt unmark(std::string_view rendered,
                               const std::vector<std::string>& originals);

  // The prompt's ids: the plain spans with split_special_tokens, the rest as the tokenizer
  // reads any text (the template's control tokens recognized), no special tokens added.
  static std::vector<int32_t> tokenize(const Tokenizer& tokenizer, const RenderedPrompt& prompt);

 private:
  std::string mark_string(std::string_view s, std::vector<std::string>& originals) const;
  // The length of the longest special text at s[pos], or 0.
  size_t match_at(std::string_view s, size_t pos) const;

  std::vector<std::string> storage_;
  std::unordered_set<std::string_view> texts_;  // views of storage_
  std::vector<size_t> lengths_;                 // the distinct lengths of texts_, longest first
  bool first_byte_[256] = {};                   // some text starts with this byte
};

}  // namespace tandem::server
