#include "grammar/program.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "grammar/grammar_error.h"

namespace tandem::grammar {

namespace {

// Which rules can derive the empty string, and which can derive any finite string at all.
struct RuleFacts {
  std::vector<bool> nullable, productive;
};

bool expr_holds(const GrammarIr& ir, ExprId id, const std::vector<bool>& rule_fact,
                bool nullable_mode) {
  const Expr& e = ir.expr(id);
  switch (e.kind) {
    case ExprKind::Nothing:
      return false;
    case ExprKind::Empty:
      return true;
    case ExprKind::Bytes:
      return !nullable_mode;
    case ExprKind::Seq:
      for (ExprId c : e.children)
        if (!expr_holds(ir, c, rule_fact, nullable_mode)) return false;
      return true;
    case ExprKind::Alt:
      for (ExprId c : e.children)
        if (expr_holds(ir, c, rule_fact, nullable_mode)) return true;
      return false;
    case ExprKind::Repeat:
      return e.min == 0 || expr_holds(ir, e.children[0], rule_fact, nullable_mode);
    case ExprKind::Ref:
      return rule_fact[e.rule];
  }
  return false;
}

// The rules whose bodies refer to each rule (each referrer once per rule).
std::vector<std::vector<RuleId>> referrers(const GrammarIr& ir) {
  std::vector<std::vector<RuleId>> out(ir.num_rules());
  std::vector<ExprId> work;
  for (RuleId r = 0; r < ir.num_rules(); ++r) {
    work.assign(1, *ir.rule(r).body);
    while (!work.empty()) {
      const Expr& e = ir.expr(work.back());
      work.pop_back();
      if (e.kind == ExprKind::Ref && (out[e.rule].empty() || out[e.rule].back() != r))
        out[e.rule].push_back(r);
      work.insert(work.end(), e.children.begin(), e.children.end());
    }
  }
  return out;
}

// The least fixpoint, by a worklist: a rule is looked at again only when a rule it refers
// to became true, so a chain of n rules costs n evaluations, not n passes over all rules.
std::vector<bool> rule_fixpoint(const GrammarIr& ir, bool nullable_mode,
                                const std::vector<std::vector<RuleId>>& refs) {
  std::vector<bool> fact(ir.num_rules(), false);
  std::vector<bool> queued(ir.num_rules(), true);
  std::vector<RuleId> work;
  for (RuleId r = ir.num_rules(); r-- > 0;) work.push_back(r);
  while (!work.empty()) {
    RuleId r = work.back();
    work.pop_back();
    queued[r] = false;
    if (fact[r] || !expr_holds(ir, *ir.rule(r).body, fact, nullable_mode)) continue;
    fact[r] = true;
    for (RuleId user : refs[r])
      if (!fact[user] && !queued[user]) {
        queued[user] = true;
        work.push_back(user);
      }
  }
  return fact;
}

// The rules `id` can call before consuming a byte.
void left_calls(const GrammarIr& ir, ExprId id, const RuleFacts& facts, std::vector<RuleId>& out) {
  const Expr& e = ir.expr(id);
  switch (e.kind) {
    case ExprKind::Seq:
      for (ExprId c : e.children) {
        left_calls(ir, c, facts, out);
        if (!expr_holds(ir, c, facts.nullable, true)) break;
      }
      return;
    case ExprKind::Alt:
      for (ExprId c : e.children) left_calls(ir, c, facts, out);
      return;
    case ExprKind::Repeat:
      left_calls(ir, e.children[0], facts, out);
      return;
    case ExprKind::Ref:
      if (facts.productive[e.rule]) out.push_back(e.rule);
      return;
    default:
      return;
  }
}

// A depth-first search for a cycle of left calls, with an explicit stack (a chain of
// 100,000 rules must not overflow the thread's).
void check_left_recursion(const GrammarIr& ir, const RuleFacts& facts) {
  std::vector<std::vector<RuleId>> calls(ir.num_rules());
  for (RuleId r = 0; r < ir.num_rules(); ++r)
    if (facts.productive[r]) left_calls(ir, *ir.rule(r).body, facts, calls[r]);
  enum class Mark : uint8_t { New, Open, Done };
  std::vector<Mark> mark(ir.num_rules(), Mark::New);
  std::vector<std::pair<RuleId, size_t>> path;  // open rules, and the next call to follow
  for (RuleId root = 0; root < ir.num_rules(); ++root) {
    if (mark[root] != Mark::New) continue;
    mark[root] = Mark::Open;
    path.push_back({root, 0});
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == calls[r].size()) {
        mark[r] = Mark::Done;
        path.pop_back();
        continue;
      }
      RuleId c = calls[r][next++];
      if (mark[c] == Mark::Open)
        grammar_fail(ir.rule(c).name, "",
                     "rule '{}' is left-recursive (it can reach itself "
                     "before reading any text); rewrite it with repetition",
                     ir.rule(c).name);
      if (mark[c] == Mark::New) {
        mark[c] = Mark::Open;
        path.push_back({c, 0});
      }
    }
  }
}

// Emits instructions backwards: emit(e, next) returns the entry of code that matches e and
// then continues at next, or nullopt when e cannot complete (so the caller drops it).
class Emitter {
 public:
  Emitter(const GrammarIr& ir, const RuleFacts& facts, const ProgramLimits& limits, Program& p)
      : ir_(ir), facts_(facts), limits_(limits), p_(p), entries_(ir.num_rules()) {}

  void build() {
    uint32_t ret = ret_ = push(Inst{Op::Return});
    // Every rule's entry first, so that emitting an expression twice lays out the same
    // instructions (a chain's copies must be alike).
    for (RuleId r = 0; r < ir_.num_rules(); ++r)
      if (facts_.productive[r]) entry(r);
    RuleId root = ir_.root();
    std::optional<uint32_t> start;
    if (facts_.productive[root]) start = emit(*ir_.rule(root).body, ret);
    if (!start)
      grammar_fail(ir_.rule(root).name, "",
                   "the grammar can never be completed (no finite "
                   "output satisfies it)");
    p_.start = *start;
    while (!pending_.empty()) {
      RuleId r = pending_.back();
      pending_.pop_back();
      std::optional<uint32_t> body = emit(*ir_.rule(r).body, ret);
      TANDEM_CHECK(body, "productive rule '{}' emitted nothing", ir_.rule(r).name);
      p_.split_targets[p_.insts[*entries_[r]].a] = *body;
    }
  }

 private:
  uint32_t push(Inst inst) {
    if (p_.insts.size() >= limits_.max_insts)
      grammar_fail("", "",
                   "the grammar is too large: over {} program instructions "
                   "(--max-grammar-insts; sizes such as maxLength, maxItems or repetition "
                   "counts multiply it)",
                   limits_.max_insts);
    p_.insts.push_back(inst);
    return uint32_t(p_.insts.size() - 1);
  }

  uint32_t split(const std::vector<uint32_t>& targets) {
    uint32_t first = uint32_t(p_.split_targets.size());
    p_.split_targets.insert(p_.split_targets.end(), targets.begin(), targets.end());
    return push(Inst{Op::Split, first, uint32_t(targets.size())});
  }

  uint32_t set_index(const ByteSet& set) {
    auto [it, fresh] = set_ids_.try_emplace(set, uint32_t(p_.sets.size()));
    if (fresh) p_.sets.push_back(set);
    return it->second;
  }

  uint32_t entry(RuleId r) {
    if (!entries_[r]) {
      entries_[r] = split({0});  // the target is patched once the body is emitted
      pending_.push_back(r);
    }
    return *entries_[r];
  }

  std::optional<uint32_t> emit(ExprId id, uint32_t next) {
    const Expr& e = ir_.expr(id);
    switch (e.kind) {
      case ExprKind::Nothing:
        return std::nullopt;
      case ExprKind::Empty:
        return next;
      case ExprKind::Bytes:
        return push(Inst{Op::Bytes, set_index(e.bytes), next});
      case ExprKind::Seq: {
        std::optional<uint32_t> cur = next;
        for (size_t i = e.children.size(); i-- > 0 && cur;) cur = emit(e.children[i], *cur);
        return cur;
      }
      case ExprKind::Alt: {
        std::vector<uint32_t> targets;
        for (ExprId c : e.children)
          if (auto t = emit(c, next)) targets.push_back(*t);
        if (targets.empty()) return std::nullopt;
        return targets.size() == 1 ? targets[0] : split(targets);
      }
      case ExprKind::Repeat:
        return emit_repeat(e, next);
      case ExprKind::Ref:
        if (!facts_.productive[e.rule]) return std::nullopt;
        // A call in tail position jumps: returning to a Return is returning. So right
        // recursion (ws ::= " " ws | "") runs in constant stack, and its states repeat.
        if (next == ret_) return split({entry(e.rule)});
        return push(Inst{Op::Call, entry(e.rule), next});
    }
    return std::nullopt;
  }

  std::optional<uint32_t> emit_repeat(const Expr& e, uint32_t next) {
    ExprId child = e.children[0];
    uint32_t tail = next;
    if (!e.max) {
      // A loop: split to (child, back to the split) or on.
      uint32_t loop = split({0, next});
      if (auto body = emit(child, loop)) {
        p_.split_targets[p_.insts[loop].a] = *body;
        tail = loop;
      }
    } else {
      // Up to max-min optional copies, each of which may stop and go on.
      ChainRecorder chain(*this, child);
      for (uint32_t k = e.min; k < *e.max; ++k) {
        chain.begin_copy();
        if (auto body = emit(child, tail)) tail = split({*body, next});
      }
      chain.finish();
    }
    std::optional<uint32_t> cur = tail;
    ChainRecorder chain(*this, child);
    for (uint32_t k = 0; k < e.min && cur; ++k) {
      chain.begin_copy();
      cur = emit(child, *cur);
    }
    chain.finish();
    return cur;
  }

  // Records a run of copies as a Chain when it is long, its element reads a byte, and its
  // copies came out alike.
  class ChainRecorder {
   public:
    ChainRecorder(Emitter& e, ExprId child)
        : e_(e), worth_it_(!expr_holds(e.ir_, child, e.facts_.nullable, true)) {}
    void begin_copy() { starts_.push_back(uint32_t(e_.p_.insts.size())); }
    void finish() {
      if (!worth_it_ || starts_.size() < kMinChain) return;
      uint32_t stride = starts_[1] - starts_[0];
      for (size_t c = 1; c < starts_.size(); ++c)
        if (starts_[c] - starts_[c - 1] != stride) return;
      if (uint32_t(e_.p_.insts.size()) - starts_.back() != stride) return;
      e_.p_.chains.push_back(Chain{starts_[0], stride, uint32_t(starts_.size())});
    }

   private:
    static constexpr size_t kMinChain = 16;
    Emitter& e_;
    bool worth_it_;
    std::vector<uint32_t> starts_;
  };

  const GrammarIr& ir_;
  const RuleFacts& facts_;
  const ProgramLimits& limits_;
  Program& p_;
  std::vector<std::optional<uint32_t>> entries_;
  std::vector<RuleId> pending_;
  uint32_t ret_ = 0;  // the one Return instruction
  std::unordered_map<ByteSet, uint32_t> set_ids_;
};

// Partitions the 256 bytes into classes no byte set tells apart.
void assign_byte_classes(Program& p) {
  std::array<uint32_t, 256> cls{};
  for (const ByteSet& s : p.sets) {
    std::map<std::pair<uint32_t, bool>, uint32_t> split;
    for (int b = 0; b < 256; ++b) {
      auto key = std::make_pair(cls[b], bool(s[size_t(b)]));
      cls[b] = split.try_emplace(key, uint32_t(split.size())).first->second;
    }
  }
  // Renumber in order of each class's first byte.
  std::map<uint32_t, uint8_t> renumber;
  for (int b = 0; b < 256; ++b) {
    auto [it, fresh] = renumber.try_emplace(cls[b], uint8_t(renumber.size()));
    if (fresh) p.class_byte[it->second] = uint8_t(b);
    p.byte_class[b] = it->second;
  }
  p.num_classes = uint32_t(renumber.size());
}

}  // namespace

uint32_t alias(const Program& p, uint32_t pc, uint32_t h) {
  for (const Chain& c :
       p.chains) {  // outer chains first: an inner one is then found in the copy moved to
    if (pc < c.first || pc >= c.first + c.count * c.stride) continue;
    uint32_t copy = (pc - c.first) / c.stride;
    if (copy > h) pc -= (copy - h) * c.stride;
  }
  return pc;
}

Program build_program(const GrammarIr& ir, const ProgramLimits& limits) {
  for (RuleId r = 0; r < ir.num_rules(); ++r)
    if (!ir.rule(r).body)
      grammar_fail(ir.rule(r).name, "", "rule '{}' is used but never defined", ir.rule(r).name);
  const std::vector<std::vector<RuleId>> refs = referrers(ir);
  RuleFacts facts{rule_fixpoint(ir, true, refs), rule_fixpoint(ir, false, refs)};
  check_left_recursion(ir, facts);
  Program p;
  Emitter(ir, facts, limits, p).build();
  assign_byte_classes(p);
  std::stable_sort(p.chains.begin(), p.chains.end(),
                   [](const Chain& a, const Chain& b) { return a.first < b.first; });
  return p;
}

}  // namespace tandem::grammar
