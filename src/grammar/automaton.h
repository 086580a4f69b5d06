// The lazily determinized program: a DFA whose states are the configurations of the
// pushdown program (the set of threads alive after reading some bytes, each thread a
// position and a call stack), built on demand as rows advance and as masks are computed,
// the way RE2 builds its DFA from an NFA. A state's outgoing row (one successor per byte
// class) is filled all at once the first time it is needed; afterwards a byte costs one
// table read, whatever the grammar. Grammars with recursion have unboundedly many
// configurations in principle, but only those reached exist.
//
// Not thread-safe: CompiledGrammar serializes access.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/program.h"

namespace tandem::grammar {

using StateId = uint32_t;

// State 0 reads nothing and cannot end: where every rejected byte leads.
constexpr StateId kDeadState = 0;

struct AutomatonLimits {
  size_t max_threads = 20'000;         // one configuration's thread set (grammar ambiguity)
  size_t max_bytes = size_t(1) << 30;  // all states, stacks and rows together
};

class Automaton {
 public:
  explicit Automaton(std::shared_ptr<const Program> program, AutomatonLimits limits = {});

  StateId start() const { return start_; }

  // The state after reading byte b in s (kDeadState when b is not allowed). Throws
  // GrammarError when the automaton outgrows its limits.
  StateId next(StateId s, uint8_t b) {
    if (!states_[s].expanded) expand(s);
    return table_[size_t(s) * num_classes_ + program_->byte_class[b]];
  }
  // The same for a state already expanded (the mask walk's inner loop).
  StateId next_expanded(StateId s, uint8_t b) const {
    return table_[size_t(s) * num_classes_ + program_->byte_class[b]];
  }
  void ensure_expanded(StateId s) {
    if (!states_[s].expanded) expand(s);
  }

  bool can_end(StateId s) const { return states_[s].accepting; }
  // Whether some byte can follow s (expands s).
  bool can_continue(StateId s) {
    ensure_expanded(s);
    return states_[s].live;
  }

  size_t num_states() const { return states_.size(); }
  size_t memory_bytes() const { return bytes_; }

 private:
  struct Thread {
    uint32_t pc;     // a Bytes instruction
    uint32_t stack;  // index into stacks_ (0: empty)
    bool operator<(const Thread& o) const { return pc != o.pc ? pc < o.pc : stack < o.stack; }
    bool operator==(const Thread& o) const { return pc == o.pc && stack == o.stack; }
  };
  struct StackNode {
    uint32_t ret;     // return point
    uint32_t parent;  // the rest of the stack
  };
  struct State {
    std::vector<Thread> threads;  // sorted, unique
    bool accepting = false;       // the root rule has returned: the grammar may end here
    bool expanded = false;
    bool live = false;  // some byte leads to a non-dead state (valid once expanded)
  };
  struct Closure;

  void expand(StateId s);
  void add_closure(uint32_t pc, uint32_t stack, Closure& out);
  StateId intern(Closure& c);
  uint32_t push_stack(uint32_t ret, uint32_t parent);
  void charge(size_t bytes);

  std::shared_ptr<const Program> program_;
  AutomatonLimits limits_;
  uint32_t num_classes_;
  std::vector<State> states_;
  std::vector<StateId> table_;  // [num_states, num_classes]; rows of unexpanded states unused
  std::unordered_map<std::string, StateId> state_ids_;  // threads + accepting, as bytes
  std::vector<StackNode> stacks_;
  std::unordered_map<uint64_t, uint32_t> stack_ids_;
  StateId start_ = kDeadState;
  size_t bytes_ = 0;
};

}  // namespace tandem::grammar
