// Sets of Unicode scalar values (code points without the surrogates D800-DFFF), and their
// UTF-8 encodings as byte expressions. Regex classes and GBNF character ranges are code
// point sets; the automaton reads bytes, so every set becomes a small alternation of
// byte-range sequences (one per run of same-length encodings with a shared prefix).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/grammar_ir.h"

namespace tandem::grammar {

constexpr char32_t kMaxCodepoint = 0x10FFFF;

class CodepointSet {
 public:
  CodepointSet() = default;
  static CodepointSet range(char32_t lo, char32_t hi);
  static CodepointSet single(char32_t c) { return range(c, c); }
  static CodepointSet all() { return range(0, kMaxCodepoint); }

  void add(char32_t lo, char32_t hi);
  void add(const CodepointSet& other);
  CodepointSet complement() const;
  CodepointSet minus(const CodepointSet& other) const;
  CodepointSet intersect(const CodepointSet& other) const;
  bool contains(char32_t c) const;
  bool empty() const { return ranges_.empty(); }

  // Sorted, disjoint, non-adjacent, surrogate-free inclusive ranges.
  const std::vector<std::pair<char32_t, char32_t>>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<std::pair<char32_t, char32_t>> ranges_;
};

// The UTF-8 encodings of the set's members, as one expression.
ExprId utf8_expr(GrammarIr& ir, const CodepointSet& set);

// The UTF-8 bytes of c (a scalar value).
std::string utf8_encode(char32_t c);

// Decodes one UTF-8 character from text at pos (advancing pos); nullopt for an invalid or
// truncated sequence (pos then unchanged).
std::optional<char32_t> utf8_decode(std::string_view text, size_t& pos);

}  // namespace tandem::grammar
