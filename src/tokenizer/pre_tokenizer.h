// Pre-tokenizers (HF `pre_tokenizers`): cut normalized text into the pieces the model
// tokenizes one by one. Supported: ByteLevel, Split, Metaspace, Digits, Whitespace,
// WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit and Sequence.
//
// HF materializes every split of every stage; we stream instead: each pre-tokenizer hands
// its pieces to a sink, depth first, so a Sequence never builds intermediate lists and a
// multi-megabyte input costs no per-piece allocation. The order of pieces is the same.
#pragma once

#include <memory>
#include <string_view>

#include "tokenizer/function_ref.h"
#include "tokenizer/json_fields.h"

namespace tandem::tok {

// A stretch of text on its way to the model. `at_origin`: it begins at offset 0 of the
// original input (what HF's `offsets_original().0 == 0` asks, for Metaspace "first").
struct Piece {
  std::string_view text;
  bool at_origin;
};

// Receives pieces in order. A piece's text is valid only during the call. Pre-tokenizers
// never pass empty pieces (HF drops them after every split).
using PieceSink = FunctionRef<void(const Piece&)>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `piece` is non-empty.
  virtual void pre_tokenize(const Piece& piece, PieceSink sink) const = 0;
};

// Builds a pre-tokenizer from its tokenizer.json object; null JSON gives nullptr. Throws
// tandem::Error naming the file and the type for unknown or malformed ones.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json& j, const LoadContext& ctx);

// The character-class splitters (Digits, Whitespace, WhitespaceSplit, Punctuation,
// BertPreTokenizer, CharDelimiterSplit); nullptr when `type` is none of them.
std::unique_ptr<PreTokenizer> make_char_class_pre_tokenizer(const std::string& type, const json& j,
                                                            const LoadContext& ctx);

}  // namespace tandem::tok
