// The batched EngineScorer against the reference TeacherForcedScorer on the llama oracle
// model: the same items give the same log-likelihoods (within f32 rounding), the same
// greedy flags, generations and perplexity windows, with the engine batching rows,
// chunking prompts, sharing cached prefixes between choices, and preempting.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "engine/teacher_forcing.h"
#include "eval/engine_scorer.h"
#include "eval/teacher_forced_scorer.h"
#include "model/config.h"

namespace tandem::eval {
namespace engine_scorer_test {

std::filesystem::path oracle_dir() {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "llama";
}

std::unique_ptr<Engine> start_engine(EngineConfig config, std::shared_ptr<const Tokenizer> tok) {
  auto backend = make_cpu_backend();
  auto model = load_model(oracle_dir(), *backend);
  auto engine = std::make_unique<Engine>(make_executor(std::move(backend), std::move(model)),
                                         std::move(tok), config);
  engine->start();
  return engine;
}

EngineConfig batched() {
  EngineConfig c;
  c.scheduler.max_rows = 6;
  c.scheduler.max_batched_tokens = 40;  // long contexts are chunked, rows share steps
  return c;
}

class EngineScorerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend();
    model_ = load_model(oracle_dir(), *backend_);
    tokenizer_ = Tokenizer::load(oracle_dir());
    reference_ = std::make_unique<TeacherForcedScorer>(*model_, *backend_, tokenizer_);
  }

  // Several contexts, four continuations each (so choices share their context's prefix).
  std::vector<LoglikelihoodRequest> requests() const {
    std::vector<std::string> contexts = {
        "In the beginning God created the heaven and the earth. And the earth was",
        "The capital of France is",
        "A proverb says: a stitch in time saves",
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty"};
    std::vector<std::string> endings = {" without form, and void", " Paris", " nine",
                                        " twenty-one and more"};
    std::vector<LoglikelihoodRequest> out;
    for (const std::string& c : contexts)
      for (const std::string& e : endings) out.push_back({c, e});
    out.push_back({"The cat sat on the ", "mat"});  // the trailing space moves over
    return out;
  }

  void expect_same(const std::vector<Loglikelihood>& got, const std::vector<Loglikelihood>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
      EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-4) << "request " << i;
      EXPECT_EQ(got[i].num_tokens, want[i].num_tokens) << "request " << i;
      EXPECT_EQ(got[i].greedy, want[i].greedy) << "request " << i;
    }
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<TeacherForcedScorer> reference_;
};

TEST_F(EngineScorerTest, LoglikelihoodsAgreeWithTheReference) {
  const std::vector<LoglikelihoodRequest> rs = requests();
  const std::vector<Loglikelihood> want = reference_->loglikelihood(rs);
  for (bool prefix_cache : {true, false}) {
    SCOPED_TRACE(prefix_cache);
    EngineConfig c = batched();
    c.enable_prefix_caching = prefix_cache;
    auto engine = start_engine(c, tokenizer_);
    EngineScorer scorer(*engine, tokenizer_);
    expect_same(scorer.loglikelihood(rs), want);
    // Asked again, the contexts come from the prefix cache.
    expect_same(scorer.loglikelihood(rs), want);
    if (prefix_cache) {
      EXPECT_GT(engine->stats().prefix_cache_hits_total, 0);
    }
    engine->stop();
  }
}

TEST_F(EngineScorerTest, GreedyContinuationsAreFlaggedGreedy) {
  // Six argmax tokens after a context (teacher-forced, one at a time) score as greedy in
  // both scorers; the same with its last token swapped for another does not.
  const std::vector<int32_t> context = tokenizer_->encode("And God said, Let there be", true);
  std::vector<int32_t> ids = context, greedy;
  for (int i = 0; i < 6; i++) {
    Tensor logits = teacher_forced_logits(*model_, *backend_, ids);
    const float* last = logits.ptr<float>() + (logits.rows() - 1) * logits.cols();
    greedy.push_back(int32_t(std::max_element(last, last + logits.cols()) - last));
    ids.push_back(greedy.back());
  }
  std::vector<int32_t> other = greedy;
  other.back() = (other.back() + 1) % int32_t(model_->config().vocab_size);
  const std::vector<RequestTokens> rs = {{context, greedy}, {context, other}};
  auto engine = start_engine(batched(), tokenizer_);
  EngineScorer scorer(*engine, tokenizer_);
  const std::vector<Loglikelihood> got = scorer.score_tokens(rs);
  expect_same(got, {reference_->score_tokens(context, greedy), reference_->score_tokens(context, other)});
  EXPECT_TRUE(got[0].greedy);
  EXPECT_FALSE(got[1].greedy);
  EXPECT_LT(got[1].logprob, got[0].logprob);
}

TEST_F(EngineScorerTest, PreemptedRequestsScoreTheSame) {
  EngineConfig tight = batched();
  // Room for a few rows only: the rest wait or are preempted and recomputed.
  tight.kv_budget_bytes = 7 * kv_bytes_per_block(model_->kv_specs(), 16, DType::F32);
  const std::vector<LoglikelihoodRequest> rs = requests();
  auto engine = start_engine(tight, tokenizer_);
  EngineScorer scorer(*engine, tokenizer_);
  expect_same(scorer.loglikelihood(rs), reference_->loglikelihood(rs));
}

TEST_F(EngineScorerTest, GenerationsAreTheReferencesText) {
  std::vector<GenerateRequest> gs = {{"In the beginning", {}, 12},
                                     {"The capital of France is", {"."}, 16},
                                     {"one two three", {" five", "\n"}, 10},
                                     {"A proverb says:", {}, 1}};
  auto engine = start_engine(batched(), tokenizer_);
  EngineScorer scorer(*engine, tokenizer_);
  EXPECT_EQ(scorer.generate(gs), reference_->generate(gs));
}

TEST_F(EngineScorerTest, PerplexityWindowsAgreeWithTheReference) {
  std::string text;
  for (int i = 0; i < 6; i++) text += "In the beginning was the word, and the word was with the light. ";
  auto engine = start_engine(batched(), tokenizer_);
  EngineScorer scorer(*engine, tokenizer_);
  for (std::optional<size_t> limit : {std::optional<size_t>(), std::optional<size_t>(2)}) {
    const std::vector<WindowNll> got = scorer.rolling_nll(text, 16, limit);
    const std::vector<WindowNll> want = reference_->rolling_nll(text, 16, limit);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
      EXPECT_EQ(got[i].num_scored, want[i].num_scored);
      EXPECT_NEAR(got[i].total_nll, want[i].total_nll, 1e-4) << "window " << i;
    }
  }
  EXPECT_THROW(scorer.rolling_nll(text, 5000, std::nullopt), Error);  // past the context
}

}  // namespace engine_scorer_test
}  // namespace tandem::eval
