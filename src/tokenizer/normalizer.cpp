#include "tokenizer/normalizer.h"

#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace {

// Keeps the characters for which keep(c) holds; clears starts_at_origin when the first
// character goes.
template <typename Keep>
void filter_chars(NormalizedText& t, Keep keep) {
  std::string out;
  out.reserve(t.text.size());
  bool first = true;
  for (size_t i = 0; i < t.text.size();) {
    size_t begin = i;
    char32_t c = next_char(t.text, i);
    if (keep(c))
      out.append(t.text, begin, i - begin);
    else if (first)
      t.starts_at_origin = false;
    first = false;
  }
  t.text = std::move(out);
}

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(NormalizedText& t) const override { t.text = normalize_form(t.text, form_); }

 private:
  NormalForm form_;
};

void lowercase(std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_lowercase(out, next_char(s, i));
  s = std::move(out);
}

class Lowercase final : public Normalizer {
 public:
  void normalize(NormalizedText& t) const override { lowercase(t.text); }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(NormalizedText& t) const override {
    std::string_view s = t.text;
    size_t begin = 0, end = s.size();
    if (left_) {
      while (begin < end) {
        size_t i = begin;
        if (!is_whitespace(next_char(s, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t at = end - 1;
        while (at > begin && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) --at;
        size_t i = at;
        if (!is_whitespace(next_char(s, i))) break;
        end = at;
      }
    }
    if (begin > 0) t.starts_at_origin = false;
    t.text = std::string(s.substr(begin, end - begin));
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  void normalize(NormalizedText& t) const override {
    filter_chars(t, [](char32_t c) { return !is_mark(c); });
  }
};

class Replace final : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(NormalizedText& t) const override {
    std::vector<Segment> segments;
    pattern_.find_segments(t.text, segments);
    std::string out;
    out.reserve(t.text.size());
    for (const Segment& s : segments) {
      if (!s.is_match) {
        out.append(t.text, s.begin, s.end - s.begin);
        continue;
      }
      // HF aligns the inserted text with the last replaced character: a leading match of
      // several characters, or one replaced by nothing, no longer starts at the origin.
      if (s.begin == 0 && s.end > 0 &&
          (content_.empty() || count_chars(std::string_view(t.text).substr(0, s.end)) > 1))
        t.starts_at_origin = false;
      out.append(content_);
    }
    t.text = std::move(out);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(NormalizedText& t) const override {
    if (!t.text.empty()) t.text = prefix_ + t.text;
  }

 private:
  std::string prefix_;
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  void normalize(NormalizedText& t) const override {
    std::string out;
    append_byte_level(out, t.text);
    t.text = std::move(out);
  }
};

struct BertOptions {
  bool clean_text, handle_chinese_chars, strip_accents, lowercase;
};

class BertNormalizer final : public Normalizer {
 public:
  explicit BertNormalizer(BertOptions o) : o_(o) {}
  void normalize(NormalizedText& t) const override {
    if (o_.clean_text) clean_text(t);
    if (o_.handle_chinese_chars) pad_cjk(t.text);
    if (o_.strip_accents) {
      t.text = normalize_form(t.text, NormalForm::NFD);
      filter_chars(t, [](char32_t c) { return !is_nonspacing_mark(c); });
    }
    if (o_.lowercase) lowercase(t.text);
  }

 private:
  // Drops NUL, U+FFFD and control characters; turns every whitespace into ' '.
  static void clean_text(NormalizedText& t) {
    filter_chars(t, [](char32_t c) {
      bool control = c != '\t' && c != '\n' && c != '\r' && is_other(c);
      return !(c == 0 || c == kReplacementChar || control);
    });
    std::string out;
    out.reserve(t.text.size());
    for (size_t i = 0; i < t.text.size();) {
      size_t begin = i;
      char32_t c = next_char(t.text, i);
      if (is_whitespace(c))
        out.push_back(' ');
      else
        out.append(t.text, begin, i - begin);
    }
    t.text = std::move(out);
  }
  static void pad_cjk(std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      size_t begin = i;
      bool cjk = is_cjk_ideograph(next_char(s, i));
      if (cjk) out.push_back(' ');
      out.append(s, begin, i - begin);
      if (cjk) out.push_back(' ');
    }
    s = std::move(out);
  }

  BertOptions o_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(NormalizedText& t) const override {
    for (const auto& step : steps_) step->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

std::unique_ptr<Normalizer> make_bert(const json& j, const LoadContext& ctx) {
  BertOptions o;
  o.clean_text = bool_field(j, "clean_text", true, ctx);
  o.handle_chinese_chars = bool_field(j, "handle_chinese_chars", true, ctx);
  o.lowercase = bool_field(j, "lowercase", true, ctx);
  o.strip_accents = bool_field(j, "strip_accents", o.lowercase, ctx);
  return std::make_unique<BertNormalizer>(o);
}

std::unique_ptr<Normalizer> make_normalizer_sequence(const json& j, const LoadContext& ctx) {
  const json& list = require_field(j, "normalizers", ctx);
  if (!list.is_array()) ctx.fail("\"normalizers\" must be an array");
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (const json& item : list)
    if (auto step = make_normalizer(item, ctx)) steps.push_back(std::move(step));
  return std::make_unique<SequenceNormalizer>(std::move(steps));
}

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j, const LoadContext& ctx) {
  if (j.is_null()) return nullptr;
  std::string type = component_type(j, ctx);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(bool_field(j, "strip_left", true, ctx),
                                   bool_field(j, "strip_right", true, ctx));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::from_json(require_field(j, "pattern", ctx), ctx),
                                     require_string(j, "content", ctx));
  if (type == "Prepend") return std::make_unique<Prepend>(require_string(j, "prepend", ctx));
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "BertNormalizer") return make_bert(j, ctx);
  if (type == "Sequence") return make_normalizer_sequence(j, ctx);
  ctx.fail(
      "unknown type '{}' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
      "StripAccents, Replace, Prepend, ByteLevel, BertNormalizer, Sequence)",
      type);
}

}  // namespace tandem::tok
