// The BPE model (HF `models::bpe::BPE`): a vocabulary, ranked merges, and the rules for
// characters missing from the vocabulary (byte fallback to <0xNN> tokens, or the unk
// token, fused or not). Dropout is ignored: inference tokenizes deterministically.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_cache.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/tokenizer_json_reader.h"

namespace tandem::tok {

struct BpeSymbol;

class BpeModel {
 public:
  // `options` is tokenizer.json's "model" object; `source` its vocab and merges (which
  // read_tokenizer_json takes out of the DOM). Throws tandem::Error for other model types,
  // malformed merges, or merges whose tokens are not in the vocabulary (as HF does).
  static std::unique_ptr<BpeModel> build(const json& options, BpeSource source,
                                         const LoadContext& ctx);
  // The same from a "model" object that still holds its vocab and merges.
  static std::unique_ptr<BpeModel> from_json(const json& j, const LoadContext& ctx) {
    check_type(j, ctx);
    return build(j, bpe_source_from_json(j, ctx), ctx);
  }
  // Throws unless `j` describes a BPE model.
  static void check_type(const json& j, const LoadContext& ctx);

  // Appends the ids of one pre-tokenized piece (HF BPE::tokenize). Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token with this id, or nullptr when the vocabulary has none.
  const std::string* id_to_token(int32_t id) const;
  // Max id + 1 (0 for an empty vocabulary).
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }

  // Merges `word` without the cache (exposed so tests can compare against a naive BPE).
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  BpeModel() = default;
  void load_vocab(std::vector<std::pair<std::string, int64_t>>& vocab, const LoadContext& ctx);
  void load_merges(const std::vector<std::pair<std::string, std::string>>& merges,
                   const std::vector<uint32_t>& ranks, const LoadContext& ctx);
  // The id of the symbol for word[begin, end): with the continuing-subword prefix unless
  // first, the end-of-word suffix if last.
  std::optional<int32_t> symbol_id(std::string_view word, size_t begin, size_t end) const;
  // The word's characters as symbols (vocabulary ids, byte fallback, unk).
  void split_symbols(std::string_view word, std::vector<BpeSymbol>& symbols) const;
  // Merges adjacent symbols, lowest rank first (leftmost on ties), until none applies.
  void apply_merges(std::vector<BpeSymbol>& symbols) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;  // [id_limit]; "" where has_token_ is false
  std::vector<bool> has_token_;           // [id_limit]
  std::vector<int32_t> small_char_ids_;   // [0x800] id of each 1- or 2-byte character, or -1
  std::array<int32_t, 256> byte_ids_{};   // id of "<0xNN>", or -1
  MergeTable merges_;
  std::optional<std::string> unk_token_;
  std::string prefix_;  // continuing_subword_prefix ("" = none)
  std::string suffix_;  // end_of_word_suffix ("" = none)
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  BpeCache cache_;  // 4 MB of 128-byte slots
};

}  // namespace tandem::tok
