// The grammar every front end compiles to (JSON Schema, regex, choices, GBNF): named rules
// whose bodies are expressions over bytes, in the shape of GBNF. Expressions live in an
// arena and are immutable once made, so a front end may reuse one in several places; a
// reused expression is copied into the automaton at every use, so anything large that is
// reused should be a rule (a call) instead.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::grammar {

using ByteSet = std::bitset<256>;
using ExprId = uint32_t;
using RuleId = uint32_t;

enum class ExprKind : uint8_t {
  Nothing,  // matches no string (an unsatisfiable part)
  Empty,    // matches the empty string
  Bytes,    // one byte from `bytes`
  Seq,      // children in order
  Alt,      // any one child
  Repeat,   // child repeated min..max times (max absent: unbounded)
  Ref,      // the language of `rule` (a call, so rules may recurse)
};

struct Expr {
  ExprKind kind = ExprKind::Nothing;
  ByteSet bytes;                 // Bytes
  std::vector<ExprId> children;  // Seq, Alt; Repeat has exactly one
  uint32_t min = 0;              // Repeat
  std::optional<uint32_t> max;   // Repeat
  RuleId rule = 0;               // Ref
};

struct Rule {
  std::string name;  // GBNF rule name, or the JSON pointer of a schema: named in errors
  std::optional<ExprId> body;
};

class GrammarIr {
 public:
  GrammarIr();

  RuleId add_rule(std::string name);
  void set_body(RuleId rule, ExprId body);
  void set_root(RuleId rule) { root_ = rule; }
  RuleId root() const { return root_; }
  std::optional<RuleId> find_rule(std::string_view name) const;

  // Constructors simplify as they go: Nothing absorbs a Seq and drops out of an Alt, Empty
  // drops out of a Seq, nested Seqs and Alts flatten, sibling Bytes in an Alt merge.
  ExprId nothing() const { return kNothing; }
  ExprId empty() const { return kEmpty; }
  ExprId bytes(const ByteSet& set);
  ExprId byte_range(uint8_t lo, uint8_t hi);
  ExprId literal(std::string_view text);
  ExprId seq(std::vector<ExprId> parts);
  ExprId alt(std::vector<ExprId> options);
  ExprId repeat(ExprId e, uint32_t min, std::optional<uint32_t> max);
  ExprId optional(ExprId e) { return repeat(e, 0, 1); }
  ExprId star(ExprId e) { return repeat(e, 0, std::nullopt); }
  ExprId plus(ExprId e) { return repeat(e, 1, std::nullopt); }
  ExprId ref(RuleId rule);

  const Expr& expr(ExprId id) const { return exprs_[id]; }
  const Rule& rule(RuleId id) const { return rules_[id]; }
  size_t num_rules() const { return rules_.size(); }
  size_t num_exprs() const { return exprs_.size(); }

 private:
  static constexpr ExprId kNothing = 0;
  static constexpr ExprId kEmpty = 1;
  ExprId add(Expr e);

  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  std::unordered_map<std::string, RuleId> by_name_;  // the first rule of each name
  RuleId root_ = 0;
};

}  // namespace tandem::grammar
