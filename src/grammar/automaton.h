// The lazily determinized program: a DFA whose states are the configurations of the
// pushdown program (the set of threads alive after reading some bytes, each thread a
// position and a call stack), built on demand as rows advance and as masks are computed,
// the way RE2 builds its DFA from an NFA. A state's outgoing row (one successor per byte
// class) is filled all at once the first time it is needed; afterwards a byte costs one
// table read, whatever the grammar. Grammars with recursion have unboundedly many
// configurations in principle, but only those reached exist.
//
// Top frames: top_frame(s) is s with every thread's stack replaced by an unknown one. Its
// threads return into the unknown instead of into their callers, and a state records
// whether some thread did so (it "escaped"). Masks use it to tell the tokens decided by the
// rules running now from those that depend on the stack below (mask_cache.h).
//
// Not thread-safe: CompiledGrammar serializes access.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/program.h"

namespace tandem::grammar {

using StateId = uint32_t;

// State 0 reads nothing, cannot end and escapes nowhere: where every rejected byte leads.
constexpr StateId kDeadState = 0;

struct AutomatonLimits {
  size_t max_threads = 20'000;           // one configuration's thread set (grammar ambiguity)
  size_t max_bytes = size_t(256) << 20;  // all states, stacks and rows (a schema: < 10 MiB)
};

// Per-state flags, one byte each (the mask walk reads them in its inner loop).
enum StateFlag : uint8_t {
  kExpanded = 1,    // the state's row is filled
  kHasThreads = 2,  // some thread can still read a byte
  kEscaped = 4,     // reaching this state, a thread returned into an unknown stack
};

class Automaton {
 public:
  explicit Automaton(std::shared_ptr<const Program> program, AutomatonLimits limits = {});

  StateId start() const { return start_; }

  // The state after reading byte b in s (kDeadState when b is not allowed). Throws
  // GrammarError when the automaton outgrows its limits.
  StateId next(StateId s, uint8_t b) {
    ensure_expanded(s);
    return table_[size_t(s) * num_classes_ + program_->byte_class[b]];
  }
  void ensure_expanded(StateId s) {
    if (!(flags_[s] & kExpanded)) expand(s);
  }

  // Raw access for the mask walk's inner loop; valid until the next expansion.
  struct Rows {
    const StateId* table;  // [num_states, num_classes]
    const uint8_t* flags;  // [num_states]: StateFlag bits
    uint32_t num_classes;
  };
  Rows rows() const { return Rows{table_.data(), flags_.data(), num_classes_}; }
  const std::array<uint8_t, 256>& byte_class() const { return program_->byte_class; }

  bool can_end(StateId s) const { return states_[s].accepting; }
  // Whether some byte can follow s (expands s).
  bool can_continue(StateId s) {
    ensure_expanded(s);
    return states_[s].live;
  }
  // s with its threads' stacks unknown (memoized).
  StateId top_frame(StateId s);
  // A state that acts as s on every byte string of at most `horizon` bytes, shared by the
  // states that differ only in how far they are from the end of a long repetition (a
  // maxLength string, a maxItems array): their positions are moved to the one `horizon`
  // copies from the end (Chain, alias()). Memoized; s itself when nothing moves.
  StateId canonical(StateId s, uint32_t horizon);

  size_t num_states() const { return states_.size(); }
  size_t memory_bytes() const { return bytes_; }

 private:
  struct Thread {
    uint32_t pc;     // a Bytes instruction
    uint32_t stack;  // index into stacks_ (0: empty, 1: unknown)
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
    bool live = false;            // some byte leads to a non-dead state (valid once expanded)
  };
  struct Closure;

  void expand(StateId s);
  void add_closure(uint32_t pc, uint32_t stack, Closure& out);
  StateId intern(Closure& c);
  uint32_t push_stack(uint32_t ret, uint32_t parent);
  uint32_t canonical_stack(uint32_t stack, uint32_t horizon);
  void charge(size_t bytes);

  std::shared_ptr<const Program> program_;
  AutomatonLimits limits_;
  uint32_t num_classes_;
  std::vector<State> states_;
  std::vector<StateId> table_;  // [num_states, num_classes]; rows of unexpanded states unused
  std::vector<uint8_t> flags_;  // [num_states]
  std::unordered_map<std::string, StateId> state_ids_;  // threads + flags, as bytes
  std::vector<StackNode> stacks_;
  std::unordered_map<uint64_t, uint32_t> stack_ids_;
  std::unordered_map<StateId, StateId> top_frames_;
  std::unordered_map<StateId, StateId> canonical_;
  std::unordered_map<uint32_t, uint32_t> canonical_stacks_;
  StateId start_ = kDeadState;
  size_t bytes_ = 0;
};

}  // namespace tandem::grammar
