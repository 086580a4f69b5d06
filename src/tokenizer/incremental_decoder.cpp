// Streaming detokenization that reproduces Tokenizer::decode exactly.
//
// Invariant: the text returned so far is a prefix of decode(all ids pushed so far + any
// continuation), and it always ends on a whole character. The window holds the tokens since
// the last "clean split": a point where decode(all) == decode(before) + decode(after) with
// the after-part decoded as not-at-start. Inside a window we re-decode on every push and
// return the part that no continuation can change.
#include <algorithm>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer/unicode.h"

namespace tandem {
namespace {

size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

bool ends_with_replacement(std::string_view s) {
  return s.ends_with(tok::kReplacementUtf8);
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(std::shared_ptr<const Tokenizer> tok,
                                       bool skip_special_tokens)
    : tok_(std::move(tok)), skip_special_(skip_special_tokens) {
  TANDEM_CHECK(tok_ != nullptr, "IncrementalDecoder needs a tokenizer");
}

std::string IncrementalDecoder::decode_window(size_t num_tokens, bool at_end) const {
  std::vector<std::string> tokens;
  tokens.reserve(num_tokens);
  for (size_t i = 0; i < num_tokens; ++i) tokens.push_back(*window_[i]);
  tok::DecodeContext ctx{at_start_, at_end, false};
  tok_->parts_->decoder->decode_chain(tokens, ctx);
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

// Whether the window's byte-level bytes end between characters (else the text ends with
// the U+FFFD of an incomplete sequence that the next token may complete).
static bool byte_level_settled(const std::vector<const std::string*>& window) {
  std::string bytes;
  for (const std::string* t : window) tok::append_token_bytes(bytes, *t);
  return tok::settled_utf8_prefix(bytes) == bytes.size();
}

size_t IncrementalDecoder::stable_length(const std::string& text) const {
  const tok::DecoderTraits& traits = tok_->parts_->decoder_traits;
  size_t stable = text.size();
  if (traits.end_sensitive) stable = common_prefix(text, decode_window(window_.size(), true));
  if (traits.byte_fallback && tok::is_byte_token(*window_.back())) {
    // An open <0xNN> run may still turn into U+FFFDs: only the text before it is final.
    size_t run = window_.size();
    while (run > 0 && tok::is_byte_token(*window_[run - 1])) --run;
    stable = std::min(stable, common_prefix(text, decode_window(run, false)));
  }
  if (traits.byte_level && !byte_level_settled(window_) && ends_with_replacement(text))
    stable = std::min(stable, text.size() - tok::kReplacementUtf8.size());
  return tok::floor_char_boundary(text, stable);
}

bool IncrementalDecoder::window_can_restart(size_t stable) const {
  const tok::DecoderTraits& traits = tok_->parts_->decoder_traits;
  if (traits.byte_fallback && tok::is_byte_token(*window_.back())) return false;
  if (traits.byte_level && !byte_level_settled(window_)) return false;
  // Leading-space rules (Metaspace, Strip of the start) act on the first text; keep the
  // sequence's first tokens together until some text has come out.
  if (at_start_ && stable == 0) return false;
  return true;
}

std::string IncrementalDecoder::push(int32_t id) {
  const std::string* token = tok_->decode_token(id, skip_special_);
  if (token == nullptr) return "";
  window_.push_back(token);
  std::string text = decode_window(window_.size(), /*at_end=*/false);
  size_t stable = stable_length(text);
  std::string out;
  if (stable > emitted_) {
    out = text.substr(emitted_, stable - emitted_);
    emitted_ = stable;
  }
  if (stable == text.size() && window_can_restart(stable)) {
    window_.clear();
    emitted_ = 0;
    at_start_ = false;
  }
  return out;
}

std::string IncrementalDecoder::finish() {
  std::string text = decode_window(window_.size(), /*at_end=*/true);
  std::string out = emitted_ < text.size() ? text.substr(emitted_) : std::string();
  window_.clear();
  emitted_ = 0;
  at_start_ = true;  // the decoder is fresh again
  return out;
}

}  // namespace tandem
