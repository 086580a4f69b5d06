// Constrained rows in the engine (issue 21): a row with a grammar emits only what its
// grammar allows and ends with `stop` once the output is complete, on a random-weight
// model whose unconstrained output is noise; a grammar that cannot finish within
// max_tokens ends with `length`; constrained, penalized and plain rows share steps, and
// the overlapped loop (which reads a step between the halves of the next, engine.h)
// emits exactly what the serial loop emits.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace grammar_engine_test {

constexpr int kVocab = 512;  // the oracle llama's logits
constexpr int32_t kEos = 2;

std::shared_ptr<const grammar::TokenVocab> oracle_vocab() {
  static auto vocab = [] {
    auto tok = Tokenizer::load(test::oracle_model("llama") / "tokenizer.json");
    grammar::TokenVocabParams p;
    p.token_bytes = tok->token_bytes();
    p.token_bytes.resize(kVocab);
    p.is_special.assign(kVocab, 0);
    for (int32_t id = 0; id < tok->vocab_size() && id < kVocab; id++) p.is_special[size_t(id)] = tok->is_special(id);
    p.eos_ids = {kEos};
    return std::make_shared<const grammar::TokenVocab>(std::move(p));
  }();
  return vocab;
}

grammar::GrammarCache& cache() {
  static grammar::GrammarCache c(oracle_vocab());
  return c;
}

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["red", "blue"]}, "maxItems": 3}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";

std::shared_ptr<grammar::CompiledGrammar> person_grammar() {
  return cache().get(grammar::GrammarSpec::json_schema(nlohmann::ordered_json::parse(kPersonSchema)));
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::optional<FinishReason> finish;
  std::string error;
};

Outcome collect(RequestStream& s) {
  Outcome o;
  while (auto c = s.pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) o.tokens.push_back(t.token);
    if (c->finish) o.finish = c->finish;
    if (!c->error.empty()) o.error = c->error;
  }
  return o;
}

// The output's bytes (an EOS at the end adds none).
std::string text_of(const std::vector<int32_t>& tokens) {
  std::string text;
  for (int32_t t : tokens)
    if (t != kEos) text += oracle_vocab()->bytes(t);
  return text;
}

GenerationRequest constrained(std::shared_ptr<grammar::CompiledGrammar> g, int salt,
                              float temperature, int max_tokens = 200) {
  GenerationRequest r = test::greedy(test::prompt_of(9 + salt % 5, salt), max_tokens);
  r.ignore_eos = false;
  r.sampling.temperature = temperature;
  r.sampling.seed = uint64_t(100 + salt);
  r.grammar = std::move(g);
  return r;
}

std::vector<Outcome> run(EngineConfig config, const std::vector<GenerationRequest>& reqs) {
  auto engine = test::cpu_engine("llama", config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine->submit(r));
  engine->run_until_idle();
  EXPECT_EQ(engine->kv_blocks().num_used(), 0) << "KV blocks left behind";
  std::vector<Outcome> out;
  for (auto& s : streams) out.push_back(collect(*s));
  return out;
}

EngineConfig config(Overlap overlap, int rows) {
  EngineConfig c;
  c.overlap = overlap;
  c.scheduler.max_rows = rows;
  return c;
}

void expect_person(const Outcome& o) {
  SCOPED_TRACE(text_of(o.tokens));
  ASSERT_EQ(o.finish, FinishReason::Stop) << o.error;
  auto j = nlohmann::json::parse(text_of(o.tokens), nullptr, false);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("name") && j["name"].is_string());
  EXPECT_LE(j["name"].get<std::string>().size(), 8u * 4);  // 8 characters, UTF-8
  ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer());
  EXPECT_GE(j["age"].get<int>(), 0);
  EXPECT_LE(j["age"].get<int>(), 120);
  for (auto& [k, v] : j.items()) EXPECT_TRUE(k == "name" || k == "age" || k == "tags") << k;
  if (j.contains("tags")) {
    for (auto& t : j["tags"]) EXPECT_TRUE(t == "red" || t == "blue") << t;
  }
}

TEST(GrammarEngine, ConstrainedRowsFollowTheirSchemaGreedyAndSampled) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; i++) reqs.push_back(constrained(person_grammar(), i, i % 2 ? 1.f : 0.f));
  for (const Outcome& o : run(config(Overlap::Off, 8), reqs)) expect_person(o);
}

TEST(GrammarEngine, ChoicesAndRegexes) {
  auto choice = cache().get(grammar::GrammarSpec::choice({"yes", "no", "not sure"}));
  auto regex = cache().get(grammar::GrammarSpec::regex("[a-c]{2,4}-[0-9]{3}"));
  auto out = run(config(Overlap::Off, 4), {constrained(choice, 1, 1.f), constrained(choice, 2, 0.f),
                                           constrained(regex, 3, 1.f), constrained(regex, 4, 0.f)});
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ(out[size_t(i)].finish, FinishReason::Stop);
    std::string t = text_of(out[size_t(i)].tokens);
    EXPECT_TRUE(t == "yes" || t == "no" || t == "not sure") << t;
  }
  for (int i = 2; i < 4; i++) {
    EXPECT_EQ(out[size_t(i)].finish, FinishReason::Stop);
    std::string t = text_of(out[size_t(i)].tokens);
    ASSERT_GE(t.size(), 6u) << t;
    EXPECT_EQ(t[t.size() - 4], '-') << t;
    for (char c : t.substr(0, t.size() - 4)) EXPECT_TRUE(c >= 'a' && c <= 'c') << t;
    for (char c : t.substr(t.size() - 3)) EXPECT_TRUE(c >= '0' && c <= '9') << t;
  }
}

TEST(GrammarEngine, AGrammarThatCannotFinishInMaxTokensEndsWithLength) {
  auto out = run(config(Overlap::Off, 2), {constrained(person_grammar(), 7, 1.f, 4)});
  EXPECT_EQ(out[0].finish, FinishReason::Length);
  ASSERT_EQ(out[0].tokens.size(), 4u);
  grammar::Matcher m(person_grammar());  // what came out is a prefix of a valid output
  for (int32_t t : out[0].tokens) EXPECT_TRUE(m.accept_token(t));
}

// EOS is the grammar's to allow: ignore_eos and min_tokens do not keep a complete output
// going (the row would have nothing left to emit).
TEST(GrammarEngine, TheGrammarDecidesWhereTheRowEnds) {
  auto choice = cache().get(grammar::GrammarSpec::choice({"yes", "no"}));
  GenerationRequest r = constrained(choice, 3, 1.f);
  r.ignore_eos = true;
  r.min_tokens = 50;
  auto out = run(config(Overlap::Off, 1), {r});
  EXPECT_EQ(out[0].finish, FinishReason::Stop);
  std::string t = text_of(out[0].tokens);
  EXPECT_TRUE(t == "yes" || t == "no") << t;
}

TEST(GrammarEngine, MixedBatchesOverlapAsTheSerialLoopDoes) {
  auto choice = cache().get(grammar::GrammarSpec::choice({"alpha", "beta", "gamma delta"}));
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 9; i++) {
    GenerationRequest r;
    switch (i % 3) {
      case 0: r = constrained(person_grammar(), i, i % 2 ? 1.f : 0.f); break;
      case 1: r = constrained(choice, i, 0.8f); break;
      default:
        r = test::greedy(test::prompt_of(11, i), 14 + i);  // unconstrained noise
        if (i == 5) r.sampling.repetition_penalty = 1.3f;  // penalties read their history too
    }
    reqs.push_back(r);
  }
  for (int rows : {1, 3, 8}) {
    SCOPED_TRACE("max_rows " + std::to_string(rows));
    auto serial = run(config(Overlap::Off, rows), reqs);
    auto overlapped = run(config(Overlap::On, rows), reqs);
    for (size_t i = 0; i < reqs.size(); i++) {
      EXPECT_EQ(serial[i].tokens, overlapped[i].tokens) << "request " << i;
      EXPECT_EQ(serial[i].finish, overlapped[i].finish) << "request " << i;
      if (i % 3 == 0) expect_person(overlapped[i]);
      if (i % 3 == 2) {
        EXPECT_EQ(overlapped[i].tokens.size(), size_t(14 + i));
      }
    }
  }
}

// Speculative decoding (engine/speculator.h): every proposed position is masked as it
// would be without speculation (the grammar advanced along the proposals before it), a
// proposal the grammar rejects is cut there, and the rows emit exactly what they emit
// without speculation — greedy and seeded sampled rows, n-gram proposals looked up in a
// prompt full of schema-valid JSON and a draft model's (another oracle model: noise the
// grammar cuts).
TEST(GrammarEngine, SpeculatingRowsMaskEveryProposedPosition) {
  auto tok = Tokenizer::load(test::oracle_model("llama") / "tokenizer.json");
  std::vector<int32_t> json_prompt;
  for (const char* text : {R"({"name":"ab","age":12})", R"({"name":"abc","age":7,"tags":["red"]})"})
    for (int32_t id : tok->encode(std::string(text) + " " + text, false)) json_prompt.push_back(id);
  std::vector<GenerationRequest> reqs;
  auto choice = cache().get(grammar::GrammarSpec::choice({"alpha", "beta", "gamma delta"}));
  for (int i = 0; i < 6; i++) {
    GenerationRequest r =
        constrained(i % 3 == 2 ? choice : person_grammar(), i, i % 2 ? 0.9f : 0.f, 60);
    r.prompt = json_prompt;
    r.prompt.push_back(int32_t(10 + i));
    reqs.push_back(r);
  }
  auto outcomes = [&](std::optional<SpeculativeConfig> spec) {
    EngineConfig c = config(Overlap::Off, 4);
    c.speculative = spec;
    auto backend = make_cpu_backend();
    auto model = load_model(test::oracle_model("llama"), *backend);
    std::unique_ptr<Model> draft;
    if (spec && spec->method == SpecMethod::DraftModel)
      draft = load_model(test::oracle_model("qwen2"), *backend);
    Engine engine(make_executor(std::move(backend), std::move(model), {}, std::move(draft)),
                  nullptr, c);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) streams.push_back(engine.submit(r));
    engine.run_until_idle();
    std::vector<Outcome> out;
    for (auto& s : streams) out.push_back(collect(*s));
    if (spec) EXPECT_GT(engine.stats().spec_decode.num_draft_tokens, 0);
    if (spec && spec->method == SpecMethod::Ngram)
      EXPECT_GT(engine.stats().spec_decode.num_accepted_tokens, 0);
    EXPECT_EQ(engine.kv_blocks().num_used(), 0);
    return out;
  };
  SpeculativeConfig ngram{.method = SpecMethod::Ngram,
                          .num_speculative_tokens = 6,
                          .prompt_lookup_max = 4,
                          .prompt_lookup_min = 1,
                          .adaptive = false};
  SpeculativeConfig draft{.method = SpecMethod::DraftModel,
                          .num_speculative_tokens = 3,
                          .model = "qwen2",
                          .adaptive = false};
  const std::vector<Outcome> plain = outcomes(std::nullopt);
  for (const SpeculativeConfig& sc : {ngram, draft}) {
    SCOPED_TRACE(spec_method_name(sc.method));
    const std::vector<Outcome> spec = outcomes(sc);
    for (size_t i = 0; i < reqs.size(); i++) {
      if (sc.method == SpecMethod::Ngram || reqs[i].sampling.greedy())
        EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
      if (i % 3 != 2) expect_person(spec[i]);
    }
  }
}

TEST(GrammarEngine, RefusesAGrammarForAnotherVocabulary) {
  grammar::TokenVocabParams p;
  for (int b = 0; b < 300; b++) p.token_bytes.push_back(std::string(1, char(b % 256)));
  p.eos_ids = {2};
  grammar::GrammarCache other(std::make_shared<const grammar::TokenVocab>(std::move(p)));
  auto out = run(config(Overlap::Off, 1),
                 {constrained(other.get(grammar::GrammarSpec::json_object()), 1, 0.f)});
  EXPECT_EQ(out[0].finish, FinishReason::Error);
  EXPECT_NE(out[0].error.find("300 tokens"), std::string::npos) << out[0].error;
}

}  // namespace grammar_engine_test
}  // namespace tandem
