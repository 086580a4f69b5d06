// Tokenizer::token_bytes: the vocabulary as bytes, for grammar-constrained decoding. A
// grammar follows the bytes of the output, so each token must be known by exactly the bytes
// it appends; decoding a token alone mid-sequence gives that for every decoder tandem
// supports, except where decoders turn bytes into text: byte-level and byte-fallback tokens
// may hold part of a UTF-8 character, which decoding alone would replace by U+FFFD.
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_parts.h"

namespace tandem {

namespace {

// The byte of a "<0xNN>" token (is_byte_token holds).
char byte_token_byte(const std::string& token) {
  return char(std::stoi(token.substr(3, 2), nullptr, 16));
}

}  // namespace

std::vector<std::string> Tokenizer::token_bytes() const {
  const tok::TokenizerParts& p = *parts_;
  std::vector<std::string> out(size_t(p.vocab_size));
  for (int32_t id = 0; id < p.vocab_size; ++id) {
    const std::string* token = p.decode_str[size_t(id)];
    if (!token) continue;
    std::string& bytes = out[size_t(id)];
    if (p.added.id_of(*token) == id) {
      bytes = *token;  // added tokens are their content, whatever the decoder
    } else if (p.decoder_traits.byte_level) {
      tok::append_token_bytes(bytes, *token);
    } else if (p.decoder_traits.byte_fallback && tok::is_byte_token(*token)) {
      bytes = std::string(1, byte_token_byte(*token));
    } else {
      std::vector<std::string> one = {*token};
      tok::DecodeContext mid{.at_start = false, .at_end = false, .fused = false};
      p.decoder->decode_chain(one, mid);
      for (const std::string& t : one) bytes += t;
    }
  }
  return out;
}

}  // namespace tandem
