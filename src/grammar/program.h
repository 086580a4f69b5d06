// A grammar compiled to a pushdown program: a Thompson NFA over bytes whose rules call one
// another (Call pushes a return point, Return pops it), like a regex VM with a call stack.
// Built once per spec and never mutated; the lazy automaton (automaton.h) runs it.
//
// Invariants the builder establishes, which the automaton and the masks rely on:
// - every instruction that is kept can reach the end of the grammar: parts that can never
//   complete (unproductive rules, Nothing) are cut out, so no walk through an allowed token
//   can strand a row where no completion exists;
// - no rule can call itself before consuming a byte (left recursion is refused), so the
//   epsilon closure of any state is finite.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "grammar/grammar_ir.h"

namespace tandem::grammar {

enum class Op : uint8_t {
  Bytes,   // consume one byte of sets[a], then go to b
  Split,   // go to every target in split_targets[a, a + b)
  Call,    // push return point b, go to a (a rule's entry)
  Return,  // pop a return point and go there; with an empty stack the grammar has ended
};

struct Inst {
  Op op = Op::Return;
  uint32_t a = 0;
  uint32_t b = 0;
};

// A repetition unrolled into copies of one element: copy c (0-based, in emission order)
// occupies insts [first + c * stride, first + (c + 1) * stride) and has c + 1 copies left
// including itself. Every copy has the same layout, and the element reads at least one
// byte. So two copies with more than h copies left act alike on any h bytes: a token of at
// most h bytes cannot tell them apart (alias()).
struct Chain {
  uint32_t first = 0;
  uint32_t stride = 0;
  uint32_t count = 0;
};

struct Program {
  std::vector<Inst> insts;
  std::vector<Chain> chains;            // sorted by first; nested chains come after their outer one
  std::vector<ByteSet> sets;            // the byte sets of Bytes instructions
  std::vector<uint32_t> split_targets;  // Split fan-outs, concatenated
  uint32_t start = 0;                   // where the root rule's body begins
  // Bytes that no instruction tells apart share a class: the automaton's transition rows
  // hold one entry per class, not per byte.
  std::array<uint8_t, 256> byte_class{};
  std::array<uint8_t, 256> class_byte{};  // a representative byte of each class
  uint32_t num_classes = 0;
};

// pc moved, within every chain that holds it, from a copy with more than h + 1 copies left
// to the copy with h + 1 left: the same behaviour on any h bytes.
uint32_t alias(const Program& p, uint32_t pc, uint32_t h);

struct ProgramLimits {
  // --max-grammar-insts: the compiled program's size (an unrolled repetition counts every
  // copy). Compiling is linear in it: 4M instructions take about 0.3 s on one core.
  size_t max_insts = 4'000'000;
};

// Checks and compiles ir (its root rule). Throws GrammarError naming the rule for left
// recursion, for a root that can never complete, and for a program past the limits.
Program build_program(const GrammarIr& ir, const ProgramLimits& limits = {});

}  // namespace tandem::grammar
