// A row's thinking state machine (engine/reasoning_state.h) on a small vocabulary of single
// bytes plus whole-delimiter tokens: where the block opens and closes whichever tokens spell
// the delimiters, what each mask allows (the grammar's tokens or the start's while the
// row may still open a block; everything but EOS and bad closings while it thinks; the
// forced end once the budget is spent), and what the grammar is fed.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/reasoning_state.h"
#include "engine/thinking_vocab.h"
#include "grammar/grammar.h"

namespace tandem {
namespace reasoning_state_test {

constexpr int32_t kEos = 256, kThink = 257, kEndThink = 258, kEndThenBrace = 259,
                  kEndThenX = 260, kNewline = '\n';

std::vector<std::string> token_bytes() {
  std::vector<std::string> b;
  for (int i = 0; i < 256; ++i) b.push_back(std::string(1, char(i)));
  b.push_back("");  // EOS
  b.push_back("<think>");
  b.push_back("</think>");
  b.push_back("</think>{");  // closes the block and opens the answer's object
  b.push_back("k>x");        // completes "</think" and goes on with "x"
  return b;
}

std::shared_ptr<const ThinkingVocab> thinking_vocab() {
  static auto v = std::make_shared<const ThinkingVocab>(ThinkingVocabParams{
      .token_bytes = token_bytes(),
      .eos_ids = {kEos},
      .start = "<think>",
      .end = "</think>",
      .forced_end = {kNewline, kEndThink},
      .max_space_before_start = 2});
  return v;
}

std::shared_ptr<grammar::CompiledGrammar> object_grammar() {
  static auto cache = [] {
    grammar::TokenVocabParams p;
    p.token_bytes = token_bytes();
    p.is_special.assign(p.token_bytes.size(), 0);
    p.is_special[kEos] = 1;
    p.eos_ids = {kEos};
    return std::make_shared<grammar::GrammarCache>(
        std::make_shared<const grammar::TokenVocab>(std::move(p)));
  }();
  return cache->get(grammar::GrammarSpec::json_schema(
      nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"integer"}}})")));
}

std::vector<uint32_t> mask_of(const ReasoningState& s, const grammar::Matcher* m) {
  std::vector<uint32_t> words((thinking_vocab()->num_tokens() + 31) / 32);
  s.fill_mask(m, words);
  return words;
}

bool allowed(const std::vector<uint32_t>& words, int32_t id) {
  return (words[size_t(id) / 32] >> (id % 32)) & 1u;
}

int num_allowed(const std::vector<uint32_t>& words) {
  int n = 0;
  for (uint32_t w : words) n += __builtin_popcount(w);
  return n;
}

using Role = ReasoningState::Role;
using Phase = ReasoningState::Phase;

TEST(ThinkingVocab, TablesFollowTheBytes) {
  const ThinkingVocab& v = *thinking_vocab();
  // Opening 2 bytes in ("<t" written): "h" continues, and nothing else of length 1.
  const auto& at2 = v.opening(2);
  EXPECT_TRUE(std::any_of(at2.begin(), at2.end(), [](auto c) { return c.token == 'h' && c.next == 3; }));
  EXPECT_FALSE(std::any_of(at2.begin(), at2.end(), [](auto c) { return c.token == '<'; }));
  const auto& at0 = v.opening(0);
  EXPECT_TRUE(std::any_of(at0.begin(), at0.end(), [](auto c) { return c.token == kThink && c.next == 7; }));
  // From "</think" (7 bytes matched), ">" and "k>x"... no: "k>x" completes from "</thin".
  auto closes = [&](uint32_t j, int32_t token, uint32_t tail) {
    const auto& c = v.closing(j);
    return std::any_of(c.begin(), c.end(), [&](auto x) { return x.token == token && x.tail == tail; });
  };
  EXPECT_TRUE(closes(7, '>', 1));
  EXPECT_TRUE(closes(6, kEndThenX, 2));
  EXPECT_TRUE(closes(0, kEndThenBrace, 8));
  EXPECT_TRUE(closes(3, kEndThink, 8));  // "</t" then a fresh "</think>"
  EXPECT_FALSE(closes(0, '>', 1));
  // Whitespace tokens of at most 2 bytes.
  EXPECT_EQ(v.spaces().size(), 4u);  // " ", "\t", "\n", "\r"
  EXPECT_THROW(ThinkingVocab(ThinkingVocabParams{.token_bytes = token_bytes(), .start = "<think>",
                                                 .end = "</think>", .forced_end = {'x'}}),
               Error);
}

TEST(ReasoningState, OpensThinksAndAnswersOnTheBytes) {
  ReasoningState s(ThinkingControl{thinking_vocab(), false, std::nullopt}, nullptr);
  EXPECT_EQ(s.accept('\n', nullptr), Role::Thinking);  // whitespace first: undecided
  EXPECT_EQ(s.phase(), Phase::Opening);
  for (char c : std::string("<think>")) EXPECT_EQ(s.accept(uint8_t(c), nullptr), Role::Thinking);
  EXPECT_EQ(s.phase(), Phase::Thinking);
  for (char c : std::string("hm </thin")) EXPECT_EQ(s.accept(uint8_t(c), nullptr), Role::Thinking);
  EXPECT_EQ(s.accept('k', nullptr), Role::Thinking);
  EXPECT_EQ(s.accept('>', nullptr), Role::Answer);
  EXPECT_TRUE(s.answering());
  EXPECT_EQ(s.num_thinking_tokens(), 10);

  ReasoningState direct(ThinkingControl{thinking_vocab(), false, std::nullopt}, nullptr);
  EXPECT_EQ(direct.accept('<', nullptr), Role::Thinking);
  EXPECT_EQ(direct.accept('b', nullptr), Role::Answer);  // "<b": not a start after all
  ReasoningState spaced(ThinkingControl{thinking_vocab(), false, std::nullopt}, nullptr);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(spaced.accept(' ', nullptr), Role::Thinking);
  EXPECT_EQ(spaced.accept(' ', nullptr), Role::Answer);  // past 2 bytes of whitespace
}

// A constrained row that may open a block: its grammar's tokens or the start's, until one
// of the two is chosen; the grammar starts over when the block opens.
TEST(ReasoningState, OpeningMaskIsTheGrammarOrTheStart) {
  auto g = object_grammar();
  grammar::Matcher m(g);
  ReasoningState s(ThinkingControl{thinking_vocab(), false, std::nullopt}, g);
  EXPECT_TRUE(s.reads_last_token());
  auto words = mask_of(s, &m);
  EXPECT_TRUE(allowed(words, '{'));     // the answer at once
  EXPECT_TRUE(allowed(words, '<'));     // or the start, byte by byte
  EXPECT_TRUE(allowed(words, kThink));  // or whole
  EXPECT_TRUE(allowed(words, ' '));     // or whitespace first
  EXPECT_FALSE(allowed(words, 'x'));
  EXPECT_FALSE(allowed(words, kEos));
  EXPECT_EQ(s.accept('<', &m), Role::Thinking);
  words = mask_of(s, &m);  // the grammar refused "<": only the start goes on
  EXPECT_EQ(num_allowed(words), 1);
  EXPECT_TRUE(allowed(words, 't'));
  for (char c : std::string("think>")) s.accept(uint8_t(c), &m);
  EXPECT_EQ(s.phase(), Phase::Thinking);
  EXPECT_TRUE(m.accept_bytes("{}"));  // the matcher was reset to the grammar's start

  grammar::Matcher m2(g);
  ReasoningState answers(ThinkingControl{thinking_vocab(), false, std::nullopt}, g);
  EXPECT_EQ(answers.accept('{', &m2), Role::Answer);
  EXPECT_TRUE(answers.answering());
  EXPECT_TRUE(m2.accept_bytes("}"));  // "{" went to the grammar
}

TEST(ReasoningState, ThinkingMaskKeepsTheAnswerPossible) {
  auto g = object_grammar();
  grammar::Matcher m(g);
  ReasoningState s(ThinkingControl{thinking_vocab(), true, std::nullopt}, g);
  EXPECT_EQ(s.phase(), Phase::Thinking);
  auto words = mask_of(s, &m);
  EXPECT_FALSE(allowed(words, kEos));  // the row owes an answer
  EXPECT_TRUE(allowed(words, 'x'));    // free text
  EXPECT_TRUE(allowed(words, kEndThink));
  EXPECT_TRUE(allowed(words, kEndThenBrace));  // closes and begins the object
  for (char c : std::string("hm </thin")) s.accept(uint8_t(c), &m);
  words = mask_of(s, &m);
  EXPECT_FALSE(allowed(words, kEndThenX));  // would close and write "x": not JSON
  EXPECT_TRUE(allowed(words, 'k'));
  EXPECT_EQ(s.accept(kEndThenBrace, &m), Role::Answer);
  EXPECT_TRUE(m.accept_bytes("}"));  // "{" after the end went to the grammar
  EXPECT_TRUE(m.can_end());
  // Without a grammar, a thinking row without a budget leaves the mask alone.
  ReasoningState free(ThinkingControl{thinking_vocab(), true, std::nullopt}, nullptr);
  EXPECT_FALSE(free.decides_mask());
  EXPECT_FALSE(free.reads_last_token());
}

TEST(ReasoningState, BudgetForcesTheEnd) {
  ReasoningState s(ThinkingControl{thinking_vocab(), true, 3}, nullptr);
  EXPECT_TRUE(s.reads_last_token());
  EXPECT_FALSE(s.decides_mask());
  for (char c : std::string("abc")) EXPECT_EQ(s.accept(uint8_t(c), nullptr), Role::Thinking);
  EXPECT_TRUE(s.forcing());
  auto words = mask_of(s, nullptr);
  EXPECT_EQ(num_allowed(words), 1);
  EXPECT_TRUE(allowed(words, kNewline));
  EXPECT_EQ(s.accept(kNewline, nullptr), Role::Thinking);
  words = mask_of(s, nullptr);
  EXPECT_EQ(num_allowed(words), 1);
  EXPECT_TRUE(allowed(words, kEndThink));
  EXPECT_EQ(s.accept(kEndThink, nullptr), Role::Answer);
  EXPECT_EQ(s.num_thinking_tokens(), 3);
  // A budget of 0 forces the end at once; one that opens later forces it once opened.
  ReasoningState none(ThinkingControl{thinking_vocab(), true, 0}, nullptr);
  EXPECT_TRUE(none.forcing());
  ReasoningState later(ThinkingControl{thinking_vocab(), false, 0}, nullptr);
  EXPECT_FALSE(later.forcing());
  EXPECT_EQ(later.accept(kThink, nullptr), Role::Thinking);
  EXPECT_TRUE(later.forcing());
}

}  // namespace reasoning_state_test
}  // namespace tandem
