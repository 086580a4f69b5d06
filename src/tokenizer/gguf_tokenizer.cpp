// GGUF vocabulary → tokenizer.json components (tokenizer/gguf_tokenizer.h). The components
// are what Hugging Face's own tokenizer.json holds for these models (Llama 3's, Qwen2's,
// GPT-2's, the legacy Llama/Phi-3/Gemma SentencePiece conversions), so the golden ids of
// llama.cpp's vocabulary tests — made by HF's tokenizers — are reproduced exactly.
#include "tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer/unicode.h"

namespace tandem {
namespace {

using tok::GgufTokenType;
using tok::GgufVocab;
using json = nlohmann::json;

// llama.cpp's own fallback ("default", or no tokenizer.ggml.pre): four splits in a row.
constexpr const char* kDefaultSplits[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

json split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

// The pre-tokenizer (and normalizer) of a byte-level BPE vocabulary; ignore_merges as HF's
// Llama 3 tokenizer.json sets it.
void bpe_pre_tokenizer(const GgufVocab& v, json& doc, bool& ignore_merges) {
  const std::string& p = v.pre;
  if (p == "llama-bpe" || p == "llama3" || p == "llama-v3" || p == "smaug-bpe" || p == "dbrx") {
    doc["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", {split(tok::kLlama3Split), byte_level(false)}}};
    ignore_merges = p != "smaug-bpe" && p != "dbrx";
  } else if (p == "qwen2" || p == "deepseek-r1-qwen") {
    doc["normalizer"] = {{"type", "NFC"}};
    doc["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", {split(tok::kQwen2Split), byte_level(false)}}};
  } else if (p == "gpt-2" || p == "phi-2") {
    doc["pre_tokenizer"] = byte_level(true);
  } else if (p == "default") {
    json steps = json::array();
    for (const char* r : kDefaultSplits) steps.push_back(split(r));
    steps.push_back(byte_level(false));
    doc["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", steps}};
  } else {
    fail("{}: metadata 'tokenizer.ggml.pre' is '{}', a pre-tokenizer tandem does not implement "
         "(it reads llama-bpe, llama3, qwen2, gpt-2, default)",
         v.origin, p);
  }
}

// SentencePiece BPE as merges: a pair of pieces merges into their concatenation when that is
// a piece, ranked by its score (higher first); equal scores share a rank, so the leftmost
// pair goes first — the order llama.cpp's and SentencePiece's encoders use.
void spm_merges(const GgufVocab& v, tok::BpeSource& src) {
  std::unordered_map<std::string_view, int32_t> id_of;
  id_of.reserve(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); i++) id_of.emplace(v.tokens[i], int32_t(i));
  struct Merge {
    float score;
    int32_t left, right;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < v.tokens.size(); i++) {
    if (v.types[i] != GgufTokenType::Normal && v.types[i] != GgufTokenType::UserDefined) continue;
    const std::string& t = v.tokens[i];
    for (size_t cut = tok::utf8_char_len(uint8_t(t[0])); cut < t.size();
         cut += tok::utf8_char_len(uint8_t(t[cut]))) {
      auto a = id_of.find(std::string_view(t).substr(0, cut));
      auto b = id_of.find(std::string_view(t).substr(cut));
      if (a != id_of.end() && b != id_of.end())
        merges.push_back({v.scores.empty() ? 0.f : v.scores[i], a->second, b->second});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& x, const Merge& y) { return x.score > y.score; });
  uint32_t rank = 0;
  for (size_t i = 0; i < merges.size(); i++) {
    if (i > 0 && merges[i].score != merges[i - 1].score) rank++;
    src.merges.emplace_back(v.tokens[size_t(merges[i].left)], v.tokens[size_t(merges[i].right)]);
    src.merge_ranks.push_back(rank);
  }
}

void bpe_merges(const GgufVocab& v, tok::BpeSource& src) {
  src.merges.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); i++) {
    std::string_view m = v.merges[i];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;  // llama.cpp's split
    if (space == std::string_view::npos)
      fail("{}: metadata 'tokenizer.ggml.merges'[{}] '{}' is not two tokens separated by a space",
           v.origin, i, m);
    src.merges.emplace_back(std::string(m.substr(0, space)), std::string(m.substr(space + 1)));
  }
}

// CONTROL and UNKNOWN tokens are special added tokens, USER_DEFINED ones plain added tokens:
// all are cut out of the text before the model sees it. Phi-3's strip the whitespace after
// them (llama.cpp keys this on general.name, as HF's tokenizer.json sets rstrip).
json added_tokens(const GgufVocab& v) {
  const bool phi3 = v.name.find("phi-3") != std::string::npos || v.name.find("phi3") != std::string::npos;
  json out = json::array();
  for (size_t i = 0; i < v.tokens.size(); i++) {
    const GgufTokenType t = v.types[i];
    if (t != GgufTokenType::Control && t != GgufTokenType::Unknown && t != GgufTokenType::UserDefined) continue;
    const std::string& c = v.tokens[i];
    const bool rstrip = phi3 && ((c != "<unk>" && c != "<s>" && c != "<|endoftext|>") || c == "</s>");
    out.push_back({{"id", i}, {"content", c}, {"single_word", false}, {"lstrip", false},
                   {"rstrip", rstrip}, {"normalized", false}, {"special", t != GgufTokenType::UserDefined}});
  }
  return out;
}

// add_special_tokens=true: BOS before (and EOS after) the sequence, when the file asks.
json post_processor(const GgufVocab& v) {
  json single = json::array(), specials = json::object();
  auto special = [&](int32_t id) {
    const std::string& name = v.tokens[size_t(id)];
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
    specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  };
  if (v.add_bos) special(*v.bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (v.add_eos) special(*v.eos);
  if (!v.add_bos && !v.add_eos) return nullptr;
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
}

constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

json replace(const char* from, const char* to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

}  // namespace

std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const GgufMetadata& md) {
  const GgufVocab v = tok::read_gguf_vocab(md);
  json doc = {{"version", "1.0"}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr}};
  tok::BpeSource src;
  src.has_vocab = src.has_merges = true;
  src.vocab.reserve(v.tokens.size());
  for (size_t i = 0; i < v.tokens.size(); i++) src.vocab.emplace_back(v.tokens[i], int64_t(i));
  json model = {{"type", "BPE"}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false}};
  if (v.model == "gpt2") {
    bool ignore_merges = false;
    bpe_pre_tokenizer(v, doc, ignore_merges);
    model["ignore_merges"] = ignore_merges;
    bpe_merges(v, src);
    doc["decoder"] = {{"type", "ByteLevel"}};
  } else if (v.model == "llama") {
    spm_merges(v, src);
    model["byte_fallback"] = true;
    model["fuse_unk"] = true;
    if (v.unk) model["unk_token"] = v.tokens[size_t(*v.unk)];
    const json escape = replace(" ", kSpace);
    if (v.add_space_prefix) {
      json prepend = {{"type", "Prepend"}, {"prepend", kSpace}};
      json steps = json::array();
      steps.push_back(prepend);
      steps.push_back(escape);
      doc["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
    } else {
      doc["normalizer"] = escape;
    }
    json decoders = json::array();
    decoders.push_back(replace(kSpace, " "));
    decoders.push_back({{"type", "ByteFallback"}});
    decoders.push_back({{"type", "Fuse"}});
    if (v.add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    doc["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  } else {
    fail("{}: metadata 'tokenizer.ggml.model' is '{}' (tandem reads gpt2 and llama vocabularies)",
         v.origin, v.model);
  }
  doc["model"] = model;
  doc["added_tokens"] = added_tokens(v);
  doc["post_processor"] = post_processor(v);
  return Tokenizer::from_components(doc, std::move(src), v.origin);
}

TokenizerConfig tokenizer_config_from_gguf(const GgufMetadata& md) {
  const GgufVocab v = tok::read_gguf_vocab(md);
  json j = {{"add_bos_token", v.add_bos}, {"add_eos_token", v.add_eos}};
  auto token = [&](const char* key, const std::optional<int32_t>& id) {
    if (id) j[key] = v.tokens[size_t(*id)];
  };
  token("bos_token", v.bos);
  token("eos_token", v.eos);
  token("unk_token", v.unk);
  token("pad_token", v.pad);
  json templates = json::array();
  for (const auto& e : md.entries()) {
    const std::string_view prefix = "tokenizer.chat_template.";
    if (e.key.starts_with(prefix))
      templates.push_back({{"name", e.key.substr(prefix.size())}, {"template", e.value.as_string(md.where(e.key))}});
  }
  if (auto t = md.get_string("tokenizer.chat_template")) {
    if (templates.empty()) j["chat_template"] = *t;
    else templates.push_back({{"name", "default"}, {"template", *t}});
  }
  if (!templates.empty()) j["chat_template"] = templates;
  return TokenizerConfig::parse(j, md.source());
}

}  // namespace tandem
