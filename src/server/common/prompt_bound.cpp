#include "server/common/prompt_bound.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

namespace tandem::server {
namespace {

using nlohmann::json;

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string();
}

// Whether the pre-tokenizer keeps every byte of its input; sets `byte_level` if it maps
// bytes to characters (ByteLevel).
bool keeps_every_byte(const json& pre, bool& byte_level) {
  if (pre.is_null()) return true;
  std::string type = type_of(pre);
  if (type == "Sequence") {
    if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) return false;
    return std::all_of(pre["pretokenizers"].begin(), pre["pretokenizers"].end(),
                       [&](const json& p) { return keeps_every_byte(p, byte_level); });
  }
  if (type == "ByteLevel") byte_level = true;
  if (type == "Split" || type == "Punctuation")
    return pre.value("behavior", std::string()) != "Removed";
  return type == "ByteLevel" || type == "Metaspace" || type == "Digits" || type == "UnicodeScripts";
}

// How many times shorter the normalizers can make a text (1: never shorter), or nullopt
// when they can delete any amount.
std::optional<size_t> shrink_factor(const json& norm) {
  if (norm.is_null()) return 1;
  std::string type = type_of(norm);
  if (type == "Sequence") {
    if (!norm.contains("normalizers") || !norm["normalizers"].is_array()) return std::nullopt;
    size_t factor = 1;
    for (const json& n : norm["normalizers"]) {
      std::optional<size_t> f = shrink_factor(n);
      if (!f) return std::nullopt;
      factor = std::max(factor, *f);  // 4× per code point, however many of them compose
    }
    return factor;
  }
  if (type == "Prepend" || type == "ByteLevel") return 1;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD" || type == "Lowercase")
    return 4;
  if (type == "Replace") {
    const json& pattern = norm.value("pattern", json::object());
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string())
      return std::nullopt;
    std::string from = pattern["String"].get<std::string>();
    std::string to = norm.value("content", std::string());
    if (!from.empty() && to.size() >= from.size()) return 1;
  }
  return std::nullopt;
}

size_t code_points(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

PromptBound PromptBound::from_tokenizer(const json& tj, const Tokenizer& tok) {
  PromptBound out;
  if (!tj.is_object() || !tj.contains("model")) return out;
  const json& model = tj["model"];
  if (type_of(model) != "BPE" && !(model.is_object() && model.contains("merges"))) return out;
  bool fused_unk = model.value("fuse_unk", false) && !model.value("unk_token", json()).is_null();
  bool byte_level = false;
  if (fused_unk || !keeps_every_byte(tj.value("pre_tokenizer", json()), byte_level)) return out;
  std::optional<size_t> shrink = shrink_factor(tj.value("normalizer", json()));
  if (!shrink) return out;
  size_t longest = 4;  // an unknown character: one token for up to 4 bytes
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    std::string piece = tok.id_to_token(id);
    longest = std::max(longest, byte_level ? code_points(piece) : piece.size());
  }
  if (tj.contains("added_tokens") && tj["added_tokens"].is_array())
    for (const json& t : tj["added_tokens"])
      if (t.contains("content") && t["content"].is_string())
        longest = std::max(longest, t["content"].get_ref<const std::string&>().size());
  out.max_bytes_per_token_ = longest * *shrink;
  return out;
}

int64_t PromptBound::min_tokens(size_t bytes) const {
  if (!max_bytes_per_token_) return 0;
  return int64_t((bytes + *max_bytes_per_token_ - 1) / *max_bytes_per_token_);
}

}  // namespace tandem::server
