// A served model's thinking setup (issue 43): the delimiters as tokens for a byte-level
// vocabulary, for Qwen3's (an added token each), and for control-token delimiters (Gemma
// 4's), which need special tokens kept in the text; which rows the engine follows; and the
// promise both sides rely on: the server's parser and the engine's thinking state read the
// same bytes the same way, so the answer the engine constrained is the content the API
// returns.
#include <nlohmann/json.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/reasoning_state.h"
#include "server/common/reasoning_setup.h"

namespace tandem::server {
namespace reasoning_setup_test {

ModelInfo info_of(int vocab_size, std::vector<int32_t> eos) {
  ModelInfo info;
  info.vocab_size = vocab_size;
  info.eos_token_ids = std::move(eos);
  return info;
}

std::string forced_text(const ThinkingVocab& v) {
  std::string t;
  for (int32_t id : v.forced_end()) t += v.bytes(id);
  return t;
}

TEST(ReasoningSetup, ByteLevelVocabulary) {
  auto tok = Tokenizer::load(TANDEM_TEST_DATA "/oracle/llama");
  const ReasoningSyntax& s = reasoning_syntax(ReasoningFormat::Qwen3);
  auto v = make_thinking_vocab(*tok, info_of(512, {2}), s);
  EXPECT_EQ(v->num_tokens(), 512);
  EXPECT_EQ(forced_text(*v), "\n</think>");
  EXPECT_EQ(v->eos_ids(), std::vector<int32_t>{2});
  EXPECT_FALSE(delimiters_are_special(*tok, s));
}

TEST(ReasoningSetup, QwenDelimitersAreOneTokenEach) {
  auto path = std::filesystem::path(TANDEM_TEST_DATA).parent_path().parent_path() / ".cache" /
              "tokenizers" / "qwen3" / "tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing: run scripts/bootstrap.sh";
  auto tok = Tokenizer::load(path);
  const ReasoningSyntax& s = reasoning_syntax(ReasoningFormat::Qwen3);
  auto v = make_thinking_vocab(*tok, info_of(151936, {151645}), s);
  const int32_t think = *tok->token_to_id("<think>"), end_think = *tok->token_to_id("</think>");
  EXPECT_EQ(v->forced_end().back(), end_think);
  const auto& open = v->opening(0);
  EXPECT_TRUE(std::any_of(open.begin(), open.end(), [&](auto c) { return c.token == think; }));
  const auto& close = v->closing(0);
  EXPECT_TRUE(std::any_of(close.begin(), close.end(),
                          [&](auto c) { return c.token == end_think && c.tail == 8; }));
  EXPECT_FALSE(delimiters_are_special(*tok, s));  // added tokens, not special: in the text
}

TEST(ReasoningSetup, ControlTokenDelimitersNeedSpecialTokensKept) {
  auto j = nlohmann::json::parse(byte_level_tokenizer_json(300));
  int id = 300;
  for (const char* d : {"<|channel>", "<channel|>"}) {
    j["added_tokens"].push_back({{"id", id}, {"content", d}, {"single_word", false},
                                 {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                 {"special", true}});
    j["model"]["vocab"][d] = id++;
  }
  auto tok = Tokenizer::from_json_text(j.dump());
  const ReasoningSyntax& s = reasoning_syntax(ReasoningFormat::Gemma4);
  EXPECT_TRUE(delimiters_are_special(*tok, s));
  auto v = make_thinking_vocab(*tok, info_of(302, {2}), s);
  EXPECT_EQ(v->forced_end().back(), 301);
  EXPECT_EQ(v->bytes(300), "<|channel>");  // special tokens write their content here
  EXPECT_FALSE(delimiters_are_special(*tok, reasoning_syntax(ReasoningFormat::Qwen3)));
}

TEST(ReasoningSetup, TheEngineFollowsOnlyRowsItHasWorkFor) {
  auto tok = Tokenizer::load(TANDEM_TEST_DATA "/oracle/llama");
  auto v = make_thinking_vocab(*tok, info_of(512, {2}), reasoning_syntax(ReasoningFormat::Qwen3));
  EXPECT_FALSE(thinking_control(v, ThinkingStart::Closed, 5, true));  // thinking off
  EXPECT_FALSE(thinking_control(v, ThinkingStart::Open, std::nullopt, false));  // nothing to do
  auto c = thinking_control(v, ThinkingStart::Open, 5, false);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->starts_open);
  EXPECT_EQ(c->budget, 5);
  c = thinking_control(v, ThinkingStart::MayOpen, std::nullopt, true);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->starts_open);
}

// Random outputs made of delimiter pieces: where the engine's state says the answer begins,
// the parser's content begins (after the whitespace it trims following a closing delimiter).
TEST(ReasoningSetup, ParserAndEngineAgreeWhereTheAnswerBegins) {
  const std::vector<std::string> pieces = {"<", "think", ">", "</", "<think>", "</think>", " ",
                                           "\n", "a", "b{", "thi", "nk>", "</think>\n\n{"};
  ThinkingVocabParams p;
  p.token_bytes = pieces;
  p.token_bytes.push_back("");  // EOS
  p.eos_ids = {int32_t(pieces.size())};
  p.start = "<think>";
  p.end = "</think>";
  p.forced_end = {7, 5};
  p.max_space_before_start = kMaxWhitespaceBeforeThinking;
  auto vocab = std::make_shared<const ThinkingVocab>(p);
  const ReasoningSyntax& syntax = reasoning_syntax(ReasoningFormat::Qwen3);
  std::mt19937 rng(4343);
  int num_answered = 0, num_thought = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const bool open = trial % 2;
    ReasoningState state(ThinkingControl{vocab, open, std::nullopt}, nullptr);
    std::string text, answer;
    bool answering = false, thought = false;
    const int n = 1 + int(rng() % 12);
    for (int k = 0; k < n; ++k) {
      const int32_t t = int32_t(rng() % pieces.size());
      const std::string& b = pieces[size_t(t)];
      text += b;
      if (answering) {
        answer += b;
        continue;
      }
      const bool was_thinking = state.phase() == ReasoningState::Phase::Thinking;
      if (state.accept(t, nullptr) != ReasoningState::Role::Answer) continue;
      answering = true;
      thought = was_thinking;
      // A closed block: the bytes after its end (the first "</think>": an earlier one
      // would have closed it); a row that never opened one: everything.
      answer = thought ? text.substr(text.find("</think>") + 8) : text;
    }
    ReasoningDelta d = split_reasoning(
        syntax, open ? ThinkingStart::Open : ThinkingStart::MayOpen, text);
    SCOPED_TRACE(text);
    if (!answering) {
      if (state.phase() == ReasoningState::Phase::Thinking) {
        EXPECT_EQ(d.content, "");  // still thinking: nothing is content
        num_thought += !open;
      } else {  // undecided at the end (whitespace, part of the start): the parser's content
        EXPECT_EQ(d.content, text);
      }
      continue;
    }
    ++num_answered;
    std::string expected = answer;
    if (thought) expected.erase(0, std::min(expected.size(), expected.find_first_not_of(" \n\r\t")));
    EXPECT_EQ(d.content, expected);
  }
  EXPECT_GT(num_answered, 500);
  EXPECT_GT(num_thought, 10);
}

}  // namespace reasoning_setup_test
}  // namespace tandem::server
