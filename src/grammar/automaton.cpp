#include "grammar/automaton.h"

#include <algorithm>
#include <unordered_set>

#include "grammar/grammar_error.h"

namespace tandem::grammar {

namespace {
constexpr uint32_t kUnknownStack = 1;
constexpr size_t kClosureStepsPerThread = 16;
}  // namespace

// The threads one step reaches, gathered across all the threads it starts from.
struct Automaton::Closure {
  std::vector<Thread> threads;
  bool accepting = false;
  bool escaped = false;
  std::unordered_set<uint64_t> visited;  // (pc, stack) pairs already followed
  std::vector<Thread> work;
};

Automaton::Automaton(std::shared_ptr<const Program> program, AutomatonLimits limits)
    : program_(std::move(program)), limits_(limits), num_classes_(program_->num_classes) {
  states_.push_back(State{});  // the dead state: its row (all dead) is filled
  flags_.push_back(kExpanded);
  table_.assign(num_classes_, kDeadState);
  stacks_.push_back(StackNode{0, 0});  // 0: the empty stack
  stacks_.push_back(StackNode{0, 0});  // 1: an unknown stack (never popped)
  Closure c;
  add_closure(program_->start, 0, c);
  start_ = intern(c);
}

void Automaton::add_closure(uint32_t pc, uint32_t stack, Closure& out) {
  const Program& p = *program_;
  out.work.push_back(Thread{pc, stack});
  while (!out.work.empty()) {
    Thread t = out.work.back();
    out.work.pop_back();
    if (!out.visited.insert((uint64_t(t.pc) << 32) | t.stack).second) continue;
    // The threads are counted at the end; the steps to find them are bounded here, so a
    // closure through long chains of calls and splits cannot run away first.
    if (out.visited.size() > kClosureStepsPerThread * limits_.max_threads)
      grammar_fail("", "", "the grammar is too ambiguous: a step follows more than {} paths",
                   kClosureStepsPerThread * limits_.max_threads);
    const Inst& inst = p.insts[t.pc];
    switch (inst.op) {
      case Op::Bytes:
        out.threads.push_back(t);
        break;
      case Op::Split:
        for (uint32_t i = 0; i < inst.b; ++i)
          out.work.push_back(Thread{p.split_targets[inst.a + i], t.stack});
        break;
      case Op::Call:
        out.work.push_back(Thread{inst.a, push_stack(inst.b, t.stack)});
        break;
      case Op::Return:
        if (t.stack == 0)
          out.accepting = true;
        else if (t.stack == kUnknownStack)
          out.escaped = true;
        else
          out.work.push_back(Thread{stacks_[t.stack].ret, stacks_[t.stack].parent});
        break;
    }
  }
  if (out.threads.size() > limits_.max_threads)
    grammar_fail("", "", "the grammar is too ambiguous: more than {} parses are alive at once",
                 limits_.max_threads);
}

uint32_t Automaton::push_stack(uint32_t ret, uint32_t parent) {
  uint64_t key = (uint64_t(ret) << 32) | parent;
  auto [it, fresh] = stack_ids_.try_emplace(key, uint32_t(stacks_.size()));
  if (fresh) {
    stacks_.push_back(StackNode{ret, parent});
    charge(sizeof(StackNode) + 32);
  }
  return it->second;
}

StateId Automaton::intern(Closure& c) {
  if (c.threads.empty() && !c.accepting && !c.escaped) return kDeadState;
  std::sort(c.threads.begin(), c.threads.end());
  c.threads.erase(std::unique(c.threads.begin(), c.threads.end()), c.threads.end());
  std::string key(reinterpret_cast<const char*>(c.threads.data()),
                  c.threads.size() * sizeof(Thread));
  key.push_back(char(int(c.accepting) | int(c.escaped) << 1));
  auto [it, fresh] = state_ids_.try_emplace(std::move(key), StateId(states_.size()));
  if (!fresh) return it->second;
  State s;
  s.threads = std::move(c.threads);
  s.accepting = c.accepting;
  uint8_t flags = uint8_t((s.threads.empty() ? 0 : kHasThreads) | (c.escaped ? kEscaped : 0));
  charge(sizeof(State) + 2 * s.threads.size() * sizeof(Thread) + num_classes_ * sizeof(StateId) +
         64);
  states_.push_back(std::move(s));
  flags_.push_back(flags);
  table_.resize(states_.size() * num_classes_, kDeadState);
  return it->second;
}

void Automaton::expand(StateId s) {
  const Program& p = *program_;
  std::vector<Thread> threads = states_[s].threads;  // intern() may grow states_
  std::vector<StateId> row(num_classes_, kDeadState);
  bool live = false;
  Closure c;
  for (uint32_t cls = 0; cls < num_classes_; ++cls) {
    uint8_t b = p.class_byte[cls];
    c.threads.clear();
    c.accepting = false;
    c.escaped = false;
    c.visited.clear();
    for (const Thread& t : threads) {
      const Inst& inst = p.insts[t.pc];
      if (p.sets[inst.a][b]) add_closure(inst.b, t.stack, c);
    }
    row[cls] = intern(c);
    live = live || row[cls] != kDeadState;
  }
  std::copy(row.begin(), row.end(), table_.begin() + size_t(s) * num_classes_);
  flags_[s] |= kExpanded;
  states_[s].live = live;
}

StateId Automaton::top_frame(StateId s) {
  if (auto it = top_frames_.find(s); it != top_frames_.end()) return it->second;
  Closure c;
  for (const Thread& t : states_[s].threads) c.threads.push_back(Thread{t.pc, kUnknownStack});
  StateId top = intern(c);
  top_frames_.emplace(s, top);
  return top;
}

StateId Automaton::canonical(StateId s, uint32_t horizon) {
  if (program_->chains.empty()) return s;
  if (auto it = canonical_.find(s); it != canonical_.end()) return it->second;
  Closure c;
  bool moved = false;
  for (const Thread& t : states_[s].threads) {
    Thread a{alias(*program_, t.pc, horizon), canonical_stack(t.stack, horizon)};
    moved = moved || !(a == t);
    c.threads.push_back(a);
  }
  c.accepting = states_[s].accepting;
  c.escaped = flags_[s] & kEscaped;
  StateId out = moved ? intern(c) : s;
  canonical_.emplace(s, out);
  return out;
}

uint32_t Automaton::canonical_stack(uint32_t stack, uint32_t horizon) {
  if (stack <= kUnknownStack) return stack;
  if (auto it = canonical_stacks_.find(stack); it != canonical_stacks_.end()) return it->second;
  StackNode node = stacks_[stack];
  uint32_t out =
      push_stack(alias(*program_, node.ret, horizon), canonical_stack(node.parent, horizon));
  canonical_stacks_.emplace(stack, out);
  return out;
}

void Automaton::charge(size_t bytes) {
  bytes_ += bytes;
  if (bytes_ > limits_.max_bytes)
    grammar_fail("", "",
                 "the grammar's automaton outgrew {} MiB (too many distinct states "
                 "reached)",
                 limits_.max_bytes >> 20);
}

}  // namespace tandem::grammar
