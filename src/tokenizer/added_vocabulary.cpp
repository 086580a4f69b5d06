#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace {

char32_t last_char(std::string_view s) {
  size_t at = s.size() - 1;
  while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
  return next_char(s, at);
}

// Start of the whitespace run that ends `s` (HF: the match of \s*$).
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t at = end - 1;
    while (at > 0 && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
    size_t i = at;
    if (!is_whitespace(next_char(s, i))) break;
    end = at;
  }
  return end;
}

// Length of the whitespace run that starts `s` (HF: the match of ^\s*).
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!is_whitespace(next_char(s, next))) break;
    i = next;
  }
  return i;
}

}  // namespace

void TokenMatcher::add(std::string_view pattern, int32_t value) {
  if (pattern.empty()) return;
  if (!first_bytes_.test(static_cast<unsigned char>(pattern[0]))) first_byte_list_ += pattern[0];
  first_bytes_.set(static_cast<unsigned char>(pattern[0]));
  int32_t node = 0;
  for (char ch : pattern) {
    unsigned char b = static_cast<unsigned char>(ch);
    int32_t next = child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& kids = nodes_[node].children;
      kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1})),
                  {b, next});
    }
    node = next;
  }
  nodes_[node].value = value;
}

int32_t TokenMatcher::child(int32_t node, unsigned char b) const {
  const auto& kids = nodes_[node].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1}));
  return it != kids.end() && it->first == b ? it->second : -1;
}

size_t TokenMatcher::next_candidate(std::string_view text, size_t pos) const {
  if (first_byte_list_.size() == 1) {  // the usual case ('<' for ChatML and Llama 3): memchr
    size_t at = text.find(first_byte_list_[0], pos);
    return at == std::string_view::npos ? text.size() : at;
  }
  while (pos < text.size() && !first_bytes_.test(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos;
}

std::optional<std::pair<size_t, int32_t>> TokenMatcher::longest_at(std::string_view text,
                                                                   size_t pos) const {
  if (!first_bytes_.test(static_cast<unsigned char>(text[pos]))) return std::nullopt;
  std::optional<std::pair<size_t, int32_t>> best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (nodes_[node].value >= 0) best = {i + 1 - pos, nodes_[node].value};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(const json& added_tokens, const BpeModel& model,
                                 const Normalizer* normalizer, const LoadContext& ctx) {
  if (added_tokens.is_null()) return;
  if (!added_tokens.is_array()) ctx.fail("\"added_tokens\" must be an array");
  for (const json& j : added_tokens) {
    AddedToken t;
    t.content = require_string(j, "content", ctx);
    if (t.content.empty()) continue;  // HF ignores empty tokens
    t.special = bool_field(j, "special", false, ctx);
    t.single_word = bool_field(j, "single_word", false, ctx);
    t.lstrip = bool_field(j, "lstrip", false, ctx);
    t.rstrip = bool_field(j, "rstrip", false, ctx);
    t.normalized = bool_field(j, "normalized", !t.special, ctx);
    auto model_id = model.token_to_id(t.content);
    int64_t id = model_id ? *model_id : int_field(j, "id", -1, ctx);
    if (id < 0 || id > INT32_MAX) ctx.fail("token '{}' has no valid id", t.content);
    t.id = static_cast<int32_t>(id);
    t.decoded = t.content;
    if (t.normalized && normalizer != nullptr) {
      NormalizedText n{t.content};
      normalizer->normalize(n);
      t.decoded = std::move(n.text);
    }
    tokens_.push_back(std::move(t));
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    index_by_id_[t.id] = i;
    index_by_content_[t.content] = i;
    if (t.normalized)
      normalized_.add(t.decoded, static_cast<int32_t>(i));
    else
      raw_.add(t.content, static_cast<int32_t>(i));
  }
}

void AddedVocabulary::split(std::string_view text, bool normalized_set,
                            std::vector<TextSection>& out, bool split_special) const {
  if (text.empty()) return;
  const TokenMatcher& matcher = normalized_set ? normalized_ : raw_;
  if (matcher.empty()) {
    out.push_back({0, text.size(), nullptr});
    return;
  }
  size_t start_offset = 0;
  for (size_t pos = matcher.next_candidate(text, 0); pos < text.size();
       pos = matcher.next_candidate(text, pos)) {
    auto match = matcher.longest_at(text, pos);
    if (!match) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + match->first;
    pos = stop;  // matches never overlap, even when one is rejected below
    const AddedToken& t = tokens_[match->second];
    if (split_special && t.special) continue;
    if (t.single_word) {
      bool space_before = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      size_t after = stop;
      bool space_after = stop == text.size() || !is_word_char(next_char(text, after));
      if (!space_before || !space_after) continue;
    }
    if (t.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (t.rstrip) stop += leading_space_len(text.substr(stop));
    // A previous rstrip may have swallowed the start of this match: never emit text twice.
    start = std::max(start, start_offset);
    if (start_offset < start) out.push_back({start_offset, start, nullptr});
    out.push_back({start, stop, &t});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), nullptr});
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::id_of(std::string_view content) const {
  auto it = index_by_content_.find(content);
  if (it == index_by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

}  // namespace tandem::tok
