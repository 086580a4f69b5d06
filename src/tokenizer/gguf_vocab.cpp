#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "core/error.h"

namespace tandem::tok {
namespace {

constexpr size_t kMaxTokens = size_t(1) << 26;  // BpeModel's dense id tables

// An id key within [0, n); an id outside the vocabulary counts as absent (llama.cpp warns
// and ignores it too).
std::optional<int32_t> id_key(const GgufMetadata& md, const char* key, size_t n) {
  auto v = md.get_int(key);
  if (!v || *v < 0 || uint64_t(*v) >= n) return std::nullopt;
  return int32_t(*v);
}

}  // namespace

GgufVocab read_gguf_vocab(const GgufMetadata& md) {
  GgufVocab v;
  v.origin = md.source();
  v.model = std::string(md.require_string("tokenizer.ggml.model"));
  v.pre = std::string(md.get_string("tokenizer.ggml.pre").value_or("default"));
  v.name = std::string(md.get_string("general.name").value_or(""));
  std::transform(v.name.begin(), v.name.end(), v.name.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  const GgufValue* tokens = md.find("tokenizer.ggml.tokens");
  if (!tokens) fail("{}: required metadata 'tokenizer.ggml.tokens' is missing", md.source());
  std::vector<std::string_view> text = tokens->as_strings(md.where("tokenizer.ggml.tokens"));
  if (text.empty() || text.size() > kMaxTokens)
    fail("{} holds {} tokens (1 to {})", md.where("tokenizer.ggml.tokens"), text.size(), kMaxTokens);
  const size_t n = text.size();
  v.tokens.reserve(n);
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(n);
  for (size_t i = 0; i < n; i++) {
    v.tokens.emplace_back(text[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : std::string(text[i]));
    auto [it, fresh] = seen.emplace(text[i], i);
    if (!fresh && !text[i].empty())
      fail("{}: token '{}' appears twice (ids {} and {})", md.where("tokenizer.ggml.tokens"),
           text[i], it->second, i);
  }
  if (const GgufValue* s = md.find("tokenizer.ggml.scores")) {
    v.scores = s->as_floats(md.where("tokenizer.ggml.scores"));
    if (v.scores.size() < n)
      fail("{} has {} scores for {} tokens", md.where("tokenizer.ggml.scores"), v.scores.size(), n);
  }
  v.types.assign(n, GgufTokenType::Normal);
  if (const GgufValue* t = md.find("tokenizer.ggml.token_type")) {
    std::vector<int64_t> types = t->as_ints(md.where("tokenizer.ggml.token_type"));
    if (types.size() < n)
      fail("{} has {} types for {} tokens", md.where("tokenizer.ggml.token_type"), types.size(), n);
    for (size_t i = 0; i < n; i++)
      v.types[i] = types[i] >= 0 && types[i] <= 6 ? GgufTokenType(types[i]) : GgufTokenType::Undefined;
  }
  if (const GgufValue* m = md.find("tokenizer.ggml.merges"))
    v.merges = m->as_strings(md.where("tokenizer.ggml.merges"));
  const bool spm = v.model == "llama";
  // llama.cpp's defaults where the file says nothing: SentencePiece's <unk>, <s>, </s> at
  // 0, 1, 2 and a BOS; byte-level BPE with Llama 3's pre-tokenizer adds a BOS too.
  v.bos = id_key(md, "tokenizer.ggml.bos_token_id", n);
  v.eos = id_key(md, "tokenizer.ggml.eos_token_id", n);
  v.unk = id_key(md, "tokenizer.ggml.unknown_token_id", n);
  v.pad = id_key(md, "tokenizer.ggml.padding_token_id", n);
  if (spm) {
    if (!md.has("tokenizer.ggml.bos_token_id") && n > 1) v.bos = 1;
    if (!md.has("tokenizer.ggml.eos_token_id") && n > 2) v.eos = 2;
    if (!md.has("tokenizer.ggml.unknown_token_id")) v.unk = 0;
  }
  const bool llama3 = v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3";
  v.add_bos = md.get_bool("tokenizer.ggml.add_bos_token").value_or(spm || llama3);
  v.add_eos = md.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = md.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  if (v.add_bos && !v.bos)
    fail("{}: tokenizer.ggml.add_bos_token is true, but no bos_token_id names a token", md.source());
  if (v.add_eos && !v.eos)
    fail("{}: tokenizer.ggml.add_eos_token is true, but no eos_token_id names a token", md.source());
  return v;
}

}  // namespace tandem::tok
