// Thinking rows in the engine (issue 43) on the random-weight oracle llama, whose byte-level
// vocabulary spells "<think>" and "</think>" a byte at a time: a budget ends the thinking
// with the forced end tokens after exactly that many thinking tokens, max_tokens still
// bounds the whole output; a schema is enforced on the answer only, after a thinking block
// the prompt opened (the model must think first), and the output splits into free thinking
// and a valid answer ending with `stop`; a forced tool call likewise; the overlapped loop
// emits what the serial loop emits; bad controls are refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/thinking_vocab.h"
#include "engine_test_util.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace thinking_engine_test {

constexpr int kVocab = 512;  // the oracle llama's logits
constexpr int32_t kEos = 2;

std::shared_ptr<const Tokenizer> tokenizer() {
  static auto tok = Tokenizer::load(test::oracle_model("llama") / "tokenizer.json");
  return tok;
}

std::vector<std::string> padded_bytes() {
  std::vector<std::string> b = tokenizer()->token_bytes();
  b.resize(kVocab);
  return b;
}

std::shared_ptr<const ThinkingVocab> thinking_vocab() {
  static auto v = std::make_shared<const ThinkingVocab>(ThinkingVocabParams{
      .token_bytes = padded_bytes(),
      .eos_ids = {kEos},
      .start = "<think>",
      .end = "</think>",
      .forced_end = tokenizer()->encode("\n</think>", false),
      .max_space_before_start = 8});
  return v;
}

grammar::GrammarCache& cache() {
  static grammar::GrammarCache c = [] {
    grammar::TokenVocabParams p;
    p.token_bytes = padded_bytes();
    p.is_special.assign(kVocab, 0);
    for (int32_t id = 0; id < tokenizer()->vocab_size() && id < kVocab; id++)
      p.is_special[size_t(id)] = tokenizer()->is_special(id);
    p.eos_ids = {kEos};
    return grammar::GrammarCache(std::make_shared<const grammar::TokenVocab>(std::move(p)));
  }();
  return c;
}

const char* kInvoice = R"({"type":"object","properties":{
  "total":{"type":"number"},"count":{"type":"integer"},"ok":{"type":"boolean"}},
  "required":["total","count","ok"],"additionalProperties":false})";

std::shared_ptr<grammar::CompiledGrammar> invoice_grammar() {
  return cache().get(grammar::GrammarSpec::json_schema(nlohmann::ordered_json::parse(kInvoice)));
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::optional<FinishReason> finish;
  std::string error;
  std::string text() const {  // the output's bytes (an EOS at the end adds none)
    std::string t;
    for (int32_t id : tokens)
      if (id != kEos) t += thinking_vocab()->bytes(id);
    return t;
  }
};

GenerationRequest thinking_request(int salt, bool starts_open, std::optional<int> budget,
                                   int max_tokens, float temperature = 0.f) {
  GenerationRequest r = test::greedy(test::prompt_of(9 + salt % 5, salt), max_tokens);
  r.sampling.temperature = temperature;
  r.sampling.seed = uint64_t(300 + salt);
  r.thinking = ThinkingControl{thinking_vocab(), starts_open, budget};
  return r;
}

std::vector<Outcome> run(EngineConfig config, const std::vector<GenerationRequest>& reqs) {
  auto engine = test::cpu_engine("llama", config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine->submit(r));
  engine->run_until_idle();
  EXPECT_EQ(engine->kv_blocks().num_used(), 0) << "KV blocks left behind";
  std::vector<Outcome> out;
  for (auto& s : streams) {
    Outcome o;
    while (auto c = s->pop(std::chrono::milliseconds(0))) {
      for (auto& t : c->tokens) o.tokens.push_back(t.token);
      if (c->finish) o.finish = c->finish;
      if (!c->error.empty()) o.error = c->error;
    }
    out.push_back(std::move(o));
  }
  return out;
}

EngineConfig config(Overlap overlap, int rows) {
  EngineConfig c;
  c.overlap = overlap;
  c.scheduler.max_rows = rows;
  return c;
}

// The output after the thinking block's end, and the thinking before it (start removed).
std::pair<std::string, std::string> split(const std::string& text) {
  size_t end = text.find("</think>");
  if (end == std::string::npos) return {text, ""};
  return {text.substr(0, end), text.substr(end + 8)};
}

TEST(ThinkingEngine, ABudgetEndsTheThinkingAfterExactlyThatManyTokens) {
  const std::vector<int32_t>& forced = thinking_vocab()->forced_end();
  ASSERT_GE(forced.size(), 2u);
  std::vector<GenerationRequest> reqs;
  for (int budget : {0, 3, 12}) reqs.push_back(thinking_request(budget, true, budget, 40));
  auto out = run(config(Overlap::Off, 4), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const int budget = *reqs[i].thinking->budget;
    const Outcome& o = out[i];
    SCOPED_TRACE("budget " + std::to_string(budget) + ": " + o.text());
    EXPECT_EQ(o.finish, FinishReason::Length);  // EOS ignored: max_tokens bounds it all
    ASSERT_EQ(o.tokens.size(), 40u);
    // The budget's thinking tokens, then the forced end, exactly. (The random model could
    // close the block itself first only by writing "</think>" byte by byte; it did not.)
    std::string thought;
    for (int k = 0; k < budget; ++k) thought += thinking_vocab()->bytes(o.tokens[size_t(k)]);
    ASSERT_EQ(thought.find("</think>"), std::string::npos);
    std::vector<int32_t> at(o.tokens.begin() + budget, o.tokens.begin() + budget + long(forced.size()));
    EXPECT_EQ(at, forced);
    EXPECT_EQ(split(o.text()).first, thought + "\n");
  }
}

// The model must think (the prompt opened the block), then answer; the answer follows the
// schema, numbers included, and ends with stop, though the model writes noise.
TEST(ThinkingEngine, TheSchemaConstrainsTheAnswerOnly) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r = thinking_request(i, true, 6 + i, 200, i % 2 ? 1.f : 0.f);
    r.ignore_eos = false;
    r.grammar = invoice_grammar();
    reqs.push_back(r);
  }
  auto out = run(config(Overlap::Off, 6), reqs);
  for (const Outcome& o : out) {
    SCOPED_TRACE(o.text());
    ASSERT_EQ(o.finish, FinishReason::Stop) << o.error;
    auto [thinking, answer] = split(o.text());
    ASSERT_NE(o.text().find("</think>"), std::string::npos);
    auto j = nlohmann::json::parse(answer, nullptr, false);
    ASSERT_TRUE(j.is_object()) << answer;
    EXPECT_TRUE(j["total"].is_number());
    EXPECT_TRUE(j["count"].is_number_integer());
    EXPECT_TRUE(j["ok"].is_boolean());
    EXPECT_EQ(j.size(), 3u);
    grammar::Matcher m(invoice_grammar());
    EXPECT_TRUE(m.accept_bytes(answer));
    EXPECT_TRUE(m.can_end());
  }
}

// A row the model may open a block in: whatever it does, the answer follows the grammar.
TEST(ThinkingEngine, AModelThatMayThinkIsStillHeldToItsGrammar) {
  auto choice = cache().get(grammar::GrammarSpec::choice({"yes", "no"}));
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r = thinking_request(i, false, 4, 60, 1.f);
    r.ignore_eos = false;
    r.grammar = choice;
    reqs.push_back(r);
  }
  for (const Outcome& o : run(config(Overlap::Off, 6), reqs)) {
    SCOPED_TRACE(o.text());
    ASSERT_EQ(o.finish, FinishReason::Stop) << o.error;
    std::string text = o.text();
    size_t start = text.find("<think>");
    std::string answer = text;
    if (start != std::string::npos && start <= 8) {  // it opened a block: answer after it
      ASSERT_NE(text.find("</think>"), std::string::npos);
      answer = split(text).second;
    }
    EXPECT_TRUE(answer == "yes" || answer == "no") << answer;
  }
}

// A forced tool call (tags around a schema) after thinking.
TEST(ThinkingEngine, AForcedToolCallAfterThinking) {
  grammar::GrammarSpec spec = grammar::GrammarSpec::json_schema(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"name":{"const":"get_weather"},
          "arguments":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},
          "required":["city"],"additionalProperties":false}},"required":["name","arguments"],
          "additionalProperties":false})"));
  spec.prefix = "<tool_call>\n";
  spec.suffix = "\n</tool_call>";
  GenerationRequest r = thinking_request(2, true, 5, 200);
  r.ignore_eos = false;
  r.grammar = cache().get(spec);
  auto out = run(config(Overlap::Off, 1), {r});
  ASSERT_EQ(out[0].finish, FinishReason::Stop) << out[0].error;
  std::string answer = split(out[0].text()).second;
  ASSERT_TRUE(answer.starts_with("<tool_call>\n{\"name\":\"get_weather\"")) << answer;
  ASSERT_TRUE(answer.ends_with("}\n</tool_call>")) << answer;
}

TEST(ThinkingEngine, OverlapEmitsWhatTheSerialLoopEmits) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r = thinking_request(i, i % 2 == 0, i % 3 == 0 ? std::nullopt : std::optional(4 + i), 50,
                                           i % 2 ? 0.9f : 0.f);
    if (i % 3 == 1) {
      r.grammar = invoice_grammar();
      r.ignore_eos = false;
    }
    reqs.push_back(r);
  }
  reqs.push_back(test::greedy(test::prompt_of(12, 9), 30));  // a plain row beside them
  for (int rows : {1, 4}) {
    auto serial = run(config(Overlap::Off, rows), reqs);
    auto overlapped = run(config(Overlap::On, rows), reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(serial[i].tokens, overlapped[i].tokens) << "rows " << rows << " request " << i;
      EXPECT_EQ(serial[i].finish, overlapped[i].finish) << "rows " << rows << " request " << i;
    }
  }
}

// Speculative decoding composes with thinking: a proposed position is masked like any
// other (the forced end tokens of a spent budget, the grammar after the block), so rows
// that propose from a prompt full of thinking blocks emit what they emit without it.
TEST(ThinkingEngine, SpeculationEmitsWhatThePlainLoopEmits) {
  std::vector<int32_t> blocks;
  for (int32_t id :
       tokenizer()->encode("<think>\nso</think>{\"total\": 1}<think>\nso so</think>", false))
    blocks.push_back(id);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r = thinking_request(
        i, i % 2 == 0, i % 3 == 0 ? std::nullopt : std::optional(2 + i), 50, i % 2 ? 0.9f : 0.f);
    r.prompt.insert(r.prompt.end(), blocks.begin(), blocks.end());
    if (i % 3 == 1) {
      r.grammar = invoice_grammar();
      r.ignore_eos = false;
    }
    reqs.push_back(r);
  }
  EngineConfig spec = config(Overlap::Off, 4);
  spec.speculative = SpeculativeConfig{.method = SpecMethod::Ngram,
                                       .num_speculative_tokens = 5,
                                       .prompt_lookup_max = 3,
                                       .prompt_lookup_min = 1,
                                       .adaptive = false};
  auto plain = run(config(Overlap::Off, 4), reqs);
  auto speculated = run(spec, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(plain[i].tokens, speculated[i].tokens) << "request " << i;
    EXPECT_EQ(plain[i].finish, speculated[i].finish) << "request " << i;
  }
  auto engine = test::cpu_engine("llama", spec);  // and it did speculate
  for (const auto& r : reqs) engine->submit(r);
  engine->run_until_idle();
  EXPECT_GT(engine->stats().spec_decode.num_accepted_tokens, 0);
}

TEST(ThinkingEngine, RefusesBadControls) {
  GenerationRequest negative = thinking_request(1, true, -1, 10);
  GenerationRequest no_vocab = thinking_request(1, true, 3, 10);
  no_vocab.thinking->vocab = nullptr;
  GenerationRequest other = thinking_request(1, true, 3, 10);
  std::vector<std::string> small(300, "a");
  small[0] = "</t>";
  other.thinking->vocab = std::make_shared<const ThinkingVocab>(ThinkingVocabParams{
      .token_bytes = small, .start = "<t>", .end = "</t>", .forced_end = {0}});
  auto out = run(config(Overlap::Off, 1), {negative, no_vocab, other});
  for (const Outcome& o : out) EXPECT_EQ(o.finish, FinishReason::Error);
  EXPECT_NE(out[0].error.find("budget"), std::string::npos) << out[0].error;
  EXPECT_NE(out[1].error.find("thinking vocabulary"), std::string::npos) << out[1].error;
  EXPECT_NE(out[2].error.find("300 tokens"), std::string::npos) << out[2].error;
}

}  // namespace thinking_engine_test
}  // namespace tandem
