// Patterns that Split, Replace (normalizer and decoder) match: a literal string or a regex.
// HF compiles both with Oniguruma; we use PCRE2 (UTF + UCP, JIT) and translate the few
// classes whose Unicode meaning differs (\s also matches U+0085, \w is Unicode's Word
// property) so matches fall on the same characters. ^ and $ are line anchors, as in
// Oniguruma. Matching is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/function_ref.h"
#include "tokenizer/json_fields.h"

namespace tandem::tok {

// [begin, end) bytes of some text.
struct Span {
  size_t begin;
  size_t end;
};

// A piece of text from a pattern search: a match or the gap between two (HF's
// `(Offsets, bool)` from Pattern::find_matches).
struct Segment {
  size_t begin;
  size_t end;
  bool is_match;
};

using SpanFn = FunctionRef<void(size_t begin, size_t end)>;
using SegmentFn = FunctionRef<void(const Segment&)>;

class Regex {
 public:
  // Throws tandem::Error naming the pattern when PCRE2 rejects it.
  explicit Regex(std::string_view pattern);

  // Calls fn(begin, end) for every non-overlapping match, left to right. An empty match is
  // reported and the search resumes one character later. fn may use other regexes.
  void for_each_match(std::string_view text, SpanFn fn) const;
  void find_all(std::string_view text, std::vector<Span>& out) const;

 private:
  std::shared_ptr<void> code_;  // pcre2_code, freed with pcre2_code_free
};

class Pattern {
 public:
  static Pattern literal(std::string text);
  static Pattern regex(std::string_view pattern);
  // {"String": "..."} or {"Regex": "..."}.
  static Pattern from_json(const json& j, const LoadContext& ctx);

  // Segments covering all of `text` in order: matches, and the non-empty gaps between them.
  // Empty text gives one empty non-match, as in HF.
  void for_each_segment(std::string_view text, SegmentFn fn) const;
  void find_segments(std::string_view text, std::vector<Segment>& out) const;

 private:
  std::string literal_;  // used when regex_ is null; empty literal never matches
  std::shared_ptr<Regex> regex_;
};

// Oniguruma-compatible rewrite of \s \S \w \W for PCRE2 (exposed for tests).
std::string translate_onig_classes(std::string_view pattern);

}  // namespace tandem::tok
