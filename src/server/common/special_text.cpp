#include "server/common/special_text.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace tandem::server {
namespace {

constexpr std::string_view kOpen = "\xEE\x80\x80";   // U+E000
constexpr std::string_view kClose = "\xEE\x80\x81";  // U+E001

std::vector<std::string> special_texts_of(const Tokenizer& tokenizer) {
  std::vector<std::string> out;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (tokenizer.is_special(id)) out.push_back(tokenizer.id_to_token(id));
  return out;
}

// The marker at text[pos] (which starts with kOpen): the index it holds and its length, or
// nullopt when it is not a whole marker of an index below `count`.
std::optional<std::pair<size_t, size_t>> marker_at(std::string_view text, size_t pos,
                                                   size_t count) {
  const size_t digits = pos + kOpen.size();
  size_t index = 0;
  auto [end, ec] = std::from_chars(text.data() + digits, text.data() + text.size(), index);
  if (ec != std::errc() || end == text.data() + digits || index >= count) return std::nullopt;
  const size_t close = size_t(end - text.data());
  if (text.substr(close, kClose.size()) != kClose) return std::nullopt;
  return std::pair{index, close + kClose.size() - pos};
}

}  // namespace

SpecialTextGuard::SpecialTextGuard(const Tokenizer& tokenizer)
    : SpecialTextGuard(special_texts_of(tokenizer)) {}

SpecialTextGuard::SpecialTextGuard(std::vector<std::string> special_texts)
    : storage_(std::move(special_texts)) {
  storage_.push_back(std::string(kOpen));  // a client's U+E000 is marked too
  for (const std::string& t : storage_) {
    if (t.empty()) continue;
    texts_.insert(t);
    first_byte_[static_cast<unsigned char>(t[0])] = true;
    if (std::find(lengths_.begin(), lengths_.end(), t.size()) == lengths_.end())
      lengths_.push_back(t.size());
  }
  std::sort(lengths_.rbegin(), lengths_.rend());
}

size_t SpecialTextGuard::match_at(std::string_view s, size_t pos) const {
  for (size_t n : lengths_)
    if (pos + n <= s.size() && texts_.count(s.substr(pos, n))) return n;
  return 0;
}

std::string SpecialTextGuard::mark_string(std::string_view s,
                                          std::vector<std::string>& originals) const {
  std::string out;
  size_t copied = 0;
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = first_byte_[static_cast<unsigned char>(s[pos])] ? match_at(s, pos) : 0;
    if (n == 0) {
      ++pos;
      continue;
    }
    out.append(s.substr(copied, pos - copied));
    out.append(kOpen).append(std::to_string(originals.size())).append(kClose);
    originals.emplace_back(s.substr(pos, n));
    pos += n;
    copied = pos;
  }
  if (copied == 0) return std::string(s);
  out.append(s.substr(copied));
  return out;
}

Json SpecialTextGuard::mark(const Json& value, std::vector<std::string>& originals) const {
  if (value.is_string()) return mark_string(value.get_ref<const std::string&>(), originals);
  if (value.is_array()) {
    Json out = Json::array();
    for (const Json& item : value) out.push_back(mark(item, originals));
    return out;
  }
  if (value.is_object()) {
    Json out = Json::object();
    for (auto it = value.begin(); it != value.end(); ++it)
      out[it.key()] = mark(it.value(), originals);
    return out;
  }
  return value;
}

RenderedPrompt SpecialTextGuard::unmark(std::string_view rendered,
                                        const std::vector<std::string>& originals) {
  RenderedPrompt out;
  if (originals.empty()) {
    out.text = std::string(rendered);
    return out;
  }
  out.text.reserve(rendered.size());
  size_t copied = 0;
  for (size_t pos = rendered.find(kOpen); pos != std::string_view::npos;
       pos = rendered.find(kOpen, pos)) {
    auto marker = marker_at(rendered, pos, originals.size());
    if (!marker) {  // not ours (or cut by the template): left as it is
      pos += kOpen.size();
      continue;
    }
    out.text.append(rendered.substr(copied, pos - copied));
    const std::string& original = originals[marker->first];
    const size_t begin = out.text.size(), end = begin + original.size();
    if (!out.plain.empty() && out.plain.back().end == begin)
      out.plain.back().end = end;  // adjacent: one stretch of text
    else
      out.plain.push_back({begin, end});
    out.text.append(original);
    pos += marker->second;
    copied = pos;
  }
  out.text.append(rendered.substr(copied));
  return out;
}

std::vector<int32_t> SpecialTextGuard::tokenize(const Tokenizer& tokenizer,
                                                const RenderedPrompt& prompt) {
  std::string_view text = prompt.text;
  std::vector<int32_t> ids;
  auto append = [&](std::string_view piece, bool split_special) {
    if (piece.empty()) return;
    std::vector<int32_t> more =
        tokenizer.encode(piece, /*add_special_tokens=*/false, split_special);
    ids.insert(ids.end(), more.begin(), more.end());
  };
  size_t at = 0;
  for (const RenderedPrompt::Span& span : prompt.plain) {
    append(text.substr(at, span.begin - at), false);
    append(text.substr(span.begin, span.end - span.begin), true);
    at = span.end;
  }
  append(text.substr(at), false);
  return ids;
}

}  // namespace tandem::server
