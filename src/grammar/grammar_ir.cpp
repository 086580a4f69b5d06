#include "grammar/grammar_ir.h"

#include "core/error.h"

namespace tandem::grammar {

GrammarIr::GrammarIr() {
  exprs_.push_back(Expr{.kind = ExprKind::Nothing});
  exprs_.push_back(Expr{.kind = ExprKind::Empty});
}

RuleId GrammarIr::add_rule(std::string name) {
  const RuleId id = RuleId(rules_.size());
  by_name_.try_emplace(name, id);
  rules_.push_back(Rule{std::move(name), std::nullopt});
  return id;
}

void GrammarIr::set_body(RuleId rule, ExprId body) {
  TANDEM_CHECK(rule < rules_.size());
  rules_[rule].body = body;
}

std::optional<RuleId> GrammarIr::find_rule(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

ExprId GrammarIr::add(Expr e) {
  exprs_.push_back(std::move(e));
  return ExprId(exprs_.size() - 1);
}

ExprId GrammarIr::bytes(const ByteSet& set) {
  if (set.none()) return kNothing;
  return add(Expr{.kind = ExprKind::Bytes, .bytes = set});
}

ExprId GrammarIr::byte_range(uint8_t lo, uint8_t hi) {
  ByteSet set;
  for (int b = lo; b <= hi; ++b) set.set(size_t(b));
  return bytes(set);
}

ExprId GrammarIr::literal(std::string_view text) {
  std::vector<ExprId> parts;
  parts.reserve(text.size());
  for (char c : text) parts.push_back(byte_range(uint8_t(c), uint8_t(c)));
  return seq(std::move(parts));
}

ExprId GrammarIr::seq(std::vector<ExprId> parts) {
  std::vector<ExprId> flat;
  for (ExprId p : parts) {
    const Expr& e = exprs_[p];
    if (e.kind == ExprKind::Nothing) return kNothing;
    if (e.kind == ExprKind::Empty) continue;
    if (e.kind == ExprKind::Seq)
      flat.insert(flat.end(), e.children.begin(), e.children.end());
    else
      flat.push_back(p);
  }
  if (flat.empty()) return kEmpty;
  if (flat.size() == 1) return flat[0];
  return add(Expr{.kind = ExprKind::Seq, .children = std::move(flat)});
}

ExprId GrammarIr::alt(std::vector<ExprId> options) {
  std::vector<ExprId> flat;
  ByteSet merged;
  bool has_empty = false;
  for (ExprId o : options) {
    const Expr& e = exprs_[o];
    if (e.kind == ExprKind::Nothing) continue;
    if (e.kind == ExprKind::Empty) {
      has_empty = true;
    } else if (e.kind == ExprKind::Bytes) {
      merged |= e.bytes;
    } else if (e.kind == ExprKind::Alt) {
      for (ExprId c : e.children) {
        if (exprs_[c].kind == ExprKind::Bytes)
          merged |= exprs_[c].bytes;
        else
          flat.push_back(c);
      }
    } else {
      flat.push_back(o);
    }
  }
  if (merged.any()) flat.insert(flat.begin(), bytes(merged));
  if (has_empty) flat.push_back(kEmpty);
  if (flat.empty()) return kNothing;
  if (flat.size() == 1) return flat[0];
  return add(Expr{.kind = ExprKind::Alt, .children = std::move(flat)});
}

ExprId GrammarIr::repeat(ExprId e, uint32_t min, std::optional<uint32_t> max) {
  TANDEM_CHECK(!max || *max >= min, "repeat {}..{}", min, *max);
  if (max && *max == 0) return kEmpty;
  const Expr& x = exprs_[e];
  if (x.kind == ExprKind::Empty) return kEmpty;
  if (x.kind == ExprKind::Nothing) return min == 0 ? kEmpty : kNothing;
  if (min == 1 && max && *max == 1) return e;
  return add(Expr{.kind = ExprKind::Repeat, .children = {e}, .min = min, .max = max});
}

ExprId GrammarIr::ref(RuleId rule) {
  TANDEM_CHECK(rule < rules_.size());
  return add(Expr{.kind = ExprKind::Ref, .rule = rule});
}

}  // namespace tandem::grammar
