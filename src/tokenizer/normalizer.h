// Normalizers (HF `normalizers`): NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents,
// Replace, Prepend, BertNormalizer, ByteLevel and Sequence. They run on each stretch of input
// between added tokens, and on the content of added tokens marked "normalized".
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_fields.h"

namespace tandem::tok {

// Text being normalized. `starts_at_origin` says whether its first character still maps to
// the first character of the input it came from: HF tracks full alignments; we need only
// this bit, for Metaspace's prepend_scheme "first" (which asks whether a piece begins at
// original offset 0). Normalizers that delete or merge leading characters clear it.
struct NormalizedText {
  std::string text;
  bool starts_at_origin = true;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(NormalizedText& t) const = 0;
};

// Builds a normalizer from its tokenizer.json object; null JSON gives nullptr. Throws
// tandem::Error naming the file and the type for unknown or malformed normalizers.
std::unique_ptr<Normalizer> make_normalizer(const json& j, const LoadContext& ctx);

}  // namespace tandem::tok
