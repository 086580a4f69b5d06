#include "tokenizer/pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/unicode.h"

namespace tandem::tok {
namespace {

// Oniguruma's Unicode \s is White_Space, which has U+0085; PCRE2's UCP \s lacks it.
constexpr std::string_view kSpaceClass = "\\s\\x{85}";
// Oniguruma's Unicode \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
constexpr std::string_view kWordClass = "\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

// One match block per thread, shared by all regexes: only the whole-match span is read.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create(1, nullptr));
  return md.get();
}

// Length of a POSIX class like "[:alpha:]" starting at p[i], or 0.
size_t posix_class_len(std::string_view p, size_t i) {
  if (p.substr(i, 2) != "[:") return 0;
  size_t close = p.find(":]", i + 2);
  return close == std::string_view::npos ? 0 : close + 2 - i;
}

}  // namespace

std::string translate_onig_classes(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size();) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char d = p[i + 1];
      i += 2;
      // Inside a class the members go in as they are; outside, wrapped in a class of their
      // own. \S and \W inside a class are left alone (rare; no single-class spelling).
      auto add_class = [&](std::string_view members, bool negated) {
        if (!in_class) out.append(negated ? "[^" : "[");
        out.append(members);
        if (!in_class) out.push_back(']');
      };
      if (d == 's') {
        add_class(kSpaceClass, false);
      } else if (d == 'S' && !in_class) {
        add_class(kSpaceClass, true);
      } else if (d == 'w') {
        add_class(kWordClass, false);
      } else if (d == 'W' && !in_class) {
        add_class(kWordClass, true);
      } else {
        out += c;
        out += d;
      }
      continue;
    }
    if (in_class) {
      if (size_t n = posix_class_len(p, i)) {
        out.append(p.substr(i, n));
        i += n;
        continue;
      }
      if (c == ']') in_class = false;
      out += c;
      ++i;
      continue;
    }
    out += c;
    ++i;
    if (c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];
    }
  }
  return out;
}

Regex::Regex(std::string_view pattern) {
  std::string translated = translate_onig_classes(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail("invalid regex '{}' (at offset {}): {}", pattern, offset,
         reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT, the interpreter still works
  code_ =
      std::shared_ptr<void>(code, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
}

void Regex::for_each_match(std::string_view text, SpanFn fn) const {
  auto* code = static_cast<const pcre2_code*>(code_.get());
  size_t pos = 0;
  while (pos <= text.size()) {
    // The match block is per thread and fn may run other regexes: read it before calling fn.
    pcre2_match_data* md = thread_match_data();
    // Text reaching a regex is valid UTF-8 (encode sanitizes input), so skip PCRE2's check,
    // which would otherwise rescan the whole subject on every call.
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                         PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail("regex match failed: {}", reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t begin = ov[0], end = ov[1];
    fn(begin, end);
    if (end > begin) {
      pos = end;
    } else {
      if (end >= text.size()) break;
      pos = end + utf8_char_len(static_cast<unsigned char>(text[end]));
    }
  }
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  for_each_match(text, [&](size_t begin, size_t end) { out.push_back({begin, end}); });
}

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

Pattern Pattern::regex(std::string_view pattern) {
  Pattern p;
  p.regex_ = std::make_shared<Regex>(pattern);
  return p;
}

Pattern Pattern::from_json(const json& j, const LoadContext& ctx) {
  if (!j.is_object()) ctx.fail("pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}");
  if (auto it = j.find("String"); it != j.end() && it->is_string())
    return literal(it->get<std::string>());
  if (auto it = j.find("Regex"); it != j.end() && it->is_string()) {
    try {
      return regex(it->get<std::string>());
    } catch (const Error& e) {
      ctx.fail("{}", e.what());
    }
  }
  ctx.fail("pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}", j.dump());
}

void Pattern::for_each_segment(std::string_view text, SegmentFn fn) const {
  if (text.empty()) {
    fn(Segment{0, 0, false});
    return;
  }
  size_t prev = 0;
  auto add_match = [&](size_t begin, size_t end) {
    if (prev != begin) fn(Segment{prev, begin, false});
    fn(Segment{begin, end, true});
    prev = end;
  };
  if (regex_) {
    regex_->for_each_match(text, add_match);
  } else if (!literal_.empty()) {
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size()))
      add_match(at, at + literal_.size());
  }
  if (prev != text.size()) fn(Segment{prev, text.size(), false});
}

void Pattern::find_segments(std::string_view text, std::vector<Segment>& out) const {
  for_each_segment(text, [&](const Segment& s) { out.push_back(s); });
}

}  // namespace tandem::tok
