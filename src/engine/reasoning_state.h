// One row's place in its thinking (issue 43), on the engine thread: whether it may still
// open a block, is inside one or is answering; its thinking budget; and what that means for
// its grammar. The server's parser (server/common/reasoning_parser.h) reads the same bytes
// the same way, so the text it calls reasoning is exactly what the engine let think.
//
// The rules:
// - Opening (the prompt did not open the block): the row may write a little whitespace and
//   then the start delimiter; anything else is the answer. A constrained row may write its
//   grammar's tokens or the delimiter's (the mask is their union), so a model that answers
//   at once is still held to its grammar, and one that opens the block is not.
// - Thinking: free text. The grammar is not advanced; a constrained row's mask allows every
//   token except EOS (the row owes an answer) and except a token that would close the block
//   and go on with bytes its grammar rejects. The bytes after the end delimiter, in the
//   token that completes it, are the answer's first (the grammar takes them).
// - Budget: once a row has thought `budget` tokens, the engine writes the format's forced
//   end tokens itself (each step's mask allows only the next one), and the row answers.
//   max_tokens still bounds the whole output: thinking, forced tokens and answer.
// - Answering: the grammar (if any) starts from its start state, as if the row's output
//   began there; the engine's ordinary grammar path takes over.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "engine/request.h"
#include "engine/thinking_vocab.h"
#include "grammar/matcher.h"

namespace tandem {

class ReasoningState {
 public:
  // `grammar`: the row's answer grammar, or null.
  ReasoningState(const ThinkingControl& control, std::shared_ptr<grammar::CompiledGrammar> grammar);

  enum class Phase : uint8_t { Opening, Thinking, Answering };
  Phase phase() const { return phase_; }
  bool answering() const { return phase_ == Phase::Answering; }
  bool forcing() const { return forced_next_.has_value(); }
  int num_thinking_tokens() const { return num_thinking_; }

  // Whether the next token's mask may depend on the row's last token (a grammar row, or a
  // budget that may run out): that token must then be on the host before sampling, as for
  // a grammar (engine.h's overlap rule).
  bool reads_last_token() const;
  // Whether this state decides the next token's mask (given the last token is known).
  bool decides_mask() const;
  // The mask when decides_mask(): `answer` is the row's matcher (null when unconstrained).
  // May throw grammar::GrammarError (the grammar outgrew its limits).
  void fill_mask(const grammar::Matcher* answer, std::span<uint32_t> words) const;

  // A token arrived. `answer` (the row's matcher, or null) is advanced with whatever part of
  // the token belongs to the answer, and reset when the block opens.
  enum class Role : uint8_t {
    Thinking,  // the token is thinking (or opens the block): the grammar did not see it
    Answer,    // the token is the answer's, or begins it: `answer` has taken its part
    Rejected,  // the grammar refused the answer's part (a mask was not honoured)
  };
  Role accept(int32_t token, grammar::Matcher* answer);

 private:
  Role accept_opening(int32_t token, grammar::Matcher* answer);
  Role accept_thinking(int32_t token, grammar::Matcher* answer);
  void enter_thinking(grammar::Matcher* answer);
  void fill_opening(const grammar::Matcher* answer, std::span<uint32_t> words) const;
  void fill_thinking(std::span<uint32_t> words) const;

  std::shared_ptr<const ThinkingVocab> vocab_;
  std::optional<int> budget_;
  std::optional<grammar::Matcher> fresh_;  // the grammar at its start, to reset and to test
  Phase phase_;
  // Opening: bytes of the start delimiter written, whitespace before it, and whether the
  // grammar has taken every token so far (the output may still be its answer).
  uint32_t opened_ = 0;
  uint32_t space_ = 0;
  bool grammar_alive_ = true;
  uint32_t end_state_ = 0;  // Thinking: bytes of the end delimiter the output ends with
  int num_thinking_ = 0;    // tokens thought (forced ones not counted)
  std::optional<size_t> forced_next_;  // the budget ran out: the next forced token
};

}  // namespace tandem
