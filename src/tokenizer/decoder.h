// Decoders (HF `decoders`): turn the token strings of a sequence back into text. Supported:
// ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece, BPEDecoder and
// Sequence; no decoder joins the tokens with spaces, as HF does.
//
// HF decoders see the whole token list. The streaming detokenizer decodes windows of it, so
// every decoder also takes a DecodeContext saying whether the window begins and ends the
// sequence: first-token rules (Metaspace's leading space, WordPiece's "##" rule, Strip of
// the fused text's start) apply only at the true start, last-token rules only at the end.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_fields.h"

namespace tandem::tok {

struct DecodeContext {
  bool at_start = true;  // tokens[0] is the first token of the sequence
  bool at_end = true;    // tokens.back() is its last
  bool fused = false;    // set once a step joined all tokens into one string (Fuse, ByteLevel)
};

// The cross-token effects of a decoder chain, which streaming must respect.
struct DecoderTraits {
  bool byte_fallback = false;  // a run of <0xNN> tokens decodes as one unit
  bool byte_level = false;     // token bytes join before UTF-8 decoding
  bool end_sensitive = false;  // the last token decodes differently (BPEDecoder, Strip stop)
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // HF decode_chain: rewrites the token strings; the text is their concatenation.
  virtual void decode_chain(std::vector<std::string>& tokens, DecodeContext& ctx) const = 0;
  virtual void add_traits(DecoderTraits&) const {}
};

// Builds a decoder from its tokenizer.json object; null JSON gives the space-joining default.
// Throws tandem::Error naming the file and the type for unknown or malformed decoders.
std::unique_ptr<Decoder> make_decoder(const json& j, const LoadContext& ctx);

// Whether a token is a byte-fallback token "<0xNN>" (two hex digits), as HF checks it.
bool is_byte_token(std::string_view token);

}  // namespace tandem::tok
