// One-pass reading of tokenizer.json. The model's vocab and merges are nearly all of the
// file (11 MB for Qwen3); building them as a JSON DOM and then copying them out costs
// several times the parse itself. So a SAX handler streams those two members straight into
// flat vectors and builds an ordinary DOM for everything else.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_fields.h"

namespace tandem::tok {

// The bulk of a BPE model: (token, id) pairs and merge pairs, in file order.
struct BpeSource {
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  // Each merge's rank (lower merges first; equal ranks merge leftmost first); empty: the
  // merge's index, as in tokenizer.json. A SentencePiece vocabulary's merges rank by the
  // merged piece's score, and equal scores tie (tokenizer/gguf_tokenizer.cpp).
  std::vector<uint32_t> merge_ranks;
  bool has_vocab = false;
  bool has_merges = false;
};

struct TokenizerJson {
  json doc;          // the file, with model.vocab and model.merges set to null
  BpeSource source;  // what model.vocab and model.merges held
};

// Throws tandem::Error naming `origin` for invalid JSON or malformed vocab/merges.
TokenizerJson read_tokenizer_json(std::string_view text, std::string_view origin);

// The same extraction from an already parsed model object (used for in-memory JSON).
BpeSource bpe_source_from_json(const json& model, const LoadContext& ctx);

// Splits a legacy merge "a b" (exactly one space); false when malformed.
bool split_legacy_merge(std::string_view line, std::pair<std::string, std::string>& out);

}  // namespace tandem::tok
