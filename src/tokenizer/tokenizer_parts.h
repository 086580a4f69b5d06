// The components of a loaded tokenizer.json (internal to src/tokenizer).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace tandem::tok {

struct TokenizerParts {
  std::string origin;                           // the file, for messages
  std::unique_ptr<Normalizer> normalizer;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::unique_ptr<Decoder> decoder;               // never null (default joins with spaces)
  DecoderTraits decoder_traits;
  AddedVocabulary added;
  int32_t vocab_size = 0;                      // max id + 1 over model and added tokens
  std::vector<const std::string*> decode_str;  // [vocab_size] string decode starts from; null: none
  std::vector<bool> special;                   // [vocab_size]
};

}  // namespace tandem::tok
