// The reference scorer on the llama oracle fixture (tests/data/oracle/llama): its
// log-likelihoods against log-softmax worked out here from transformers' own teacher-forced
// logits, its generations against transformers' greedy ids, its perplexity windows against
// the engine's perplexity().
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/perplexity.h"
#include "eval/teacher_forced_scorer.h"
#include "loader/safetensors.h"
#include "model/config.h"

namespace tandem::eval {
namespace teacher_forced_scorer_test {

std::filesystem::path oracle_dir() {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "llama";
}

struct OracleRun {
  std::vector<int32_t> prompt, greedy;  // [L], [24]
  std::vector<float> logits;            // [L + 24, vocab]: row t predicts token t + 1
  int64_t vocab = 0;

  // ln softmax(row)[token], in double, straight from the oracle's numbers.
  double log_softmax(size_t row, int32_t token) const {
    const float* r = logits.data() + int64_t(row) * vocab;
    double max = *std::max_element(r, r + vocab), sum = 0;
    for (int64_t i = 0; i < vocab; i++) sum += std::exp(double(r[i]) - max);
    return double(r[token]) - max - std::log(sum);
  }
};

std::vector<int32_t> ids_of(const Tensor& t) {
  return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
}

std::vector<OracleRun> load_runs() {
  auto file = SafetensorsFile::open(oracle_dir() / "golden.safetensors");
  std::vector<OracleRun> out;
  for (int i = 0; file->has("prompt." + std::to_string(i)); i++) {
    std::string s = std::to_string(i);
    OracleRun r;
    r.prompt = ids_of(file->tensor("prompt." + s));
    r.greedy = ids_of(file->tensor("greedy." + s));
    Tensor l = file->tensor("logits." + s);
    r.vocab = l.cols();
    r.logits.assign(l.ptr<float>(), l.ptr<float>() + l.numel());
    out.push_back(std::move(r));
  }
  return out;
}

class TeacherForcedScorerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend();
    model_ = load_model(oracle_dir(), *backend_);
    tokenizer_ = Tokenizer::load(oracle_dir());
    scorer_ = std::make_unique<TeacherForcedScorer>(*model_, *backend_, tokenizer_);
    runs_ = load_runs();
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<TeacherForcedScorer> scorer_;
  std::vector<OracleRun> runs_;
};

TEST_F(TeacherForcedScorerTest, LoglikelihoodOfTheGreedyContinuationMatchesTheOracle) {
  ASSERT_EQ(runs_.size(), 5u);
  for (const OracleRun& r : runs_) {
    double expected = 0;
    for (size_t j = 0; j < r.greedy.size(); j++)
      expected += r.log_softmax(r.prompt.size() - 1 + j, r.greedy[j]);
    Loglikelihood got = scorer_->score_tokens(r.prompt, r.greedy);
    EXPECT_NEAR(got.logprob, expected, 1e-3 + 1e-4 * std::abs(expected))
        << "prompt of " << r.prompt.size();
    EXPECT_EQ(got.num_tokens, 24);
    EXPECT_TRUE(got.greedy);  // transformers' greedy ids are the argmax at every step
  }
}

TEST_F(TeacherForcedScorerTest, AnUnlikelyLastTokenIsScoredAndNotGreedy) {
  const OracleRun& r = runs_[2];
  std::vector<int32_t> continuation(r.greedy.begin(), r.greedy.begin() + 5);
  // The oracle's least likely token after the first four greedy ones.
  size_t row = r.prompt.size() - 1 + 4;
  const float* logits = r.logits.data() + int64_t(row) * r.vocab;
  continuation[4] = int32_t(std::min_element(logits, logits + r.vocab) - logits);
  double expected = 0;
  for (size_t j = 0; j < continuation.size(); j++)
    expected += r.log_softmax(r.prompt.size() - 1 + j, continuation[j]);
  Loglikelihood got = scorer_->score_tokens(r.prompt, continuation);
  EXPECT_NEAR(got.logprob, expected, 1e-3 + 1e-4 * std::abs(expected));
  EXPECT_LT(got.logprob, r.log_softmax(row, r.greedy[4]) - 1.0);  // far below the greedy choice
  EXPECT_FALSE(got.greedy);
}

TEST_F(TeacherForcedScorerTest, TextRequestsScoreTheirContinuationTokens) {
  // Text that encodes to an oracle prompt + its first k greedy ids (the longest such k),
  // sent as context and continuation: the score is the oracle's over those k tokens.
  int checked = 0;
  for (const OracleRun& r : runs_) {
    std::string context = tokenizer_->decode(r.prompt, false);
    if (tokenizer_->encode(context, true) != r.prompt ||
        std::isspace((unsigned char)context.back()))
      continue;
    for (size_t k = r.greedy.size(); k >= 1; k--) {
      std::vector<int32_t> all = r.prompt;
      all.insert(all.end(), r.greedy.begin(), r.greedy.begin() + std::ptrdiff_t(k));
      std::string whole = tokenizer_->decode(all, false);
      if (whole.rfind(context, 0) != 0 || tokenizer_->encode(whole, true) != all) continue;
      std::vector<LoglikelihoodRequest> request = {{context, whole.substr(context.size())}};
      Loglikelihood got = scorer_->loglikelihood(request)[0];
      double expected = 0;
      for (size_t j = 0; j < k; j++)
        expected += r.log_softmax(r.prompt.size() - 1 + j, r.greedy[j]);
      EXPECT_EQ(got.num_tokens, int(k));
      EXPECT_NEAR(got.logprob, expected, 1e-3 + 1e-4 * std::abs(expected));
      checked++;
      break;
    }
  }
  EXPECT_GE(checked, 1) << "no oracle prompt round-trips through the tokenizer";
}

TEST_F(TeacherForcedScorerTest, GenerationIsTheOraclesGreedyText) {
  int checked = 0;
  for (const OracleRun& r : runs_) {
    std::string prompt = tokenizer_->decode(r.prompt, false);
    if (tokenizer_->encode(prompt, true) != r.prompt) continue;  // not every id run round-trips
    std::vector<int32_t> until_eos;
    for (int32_t id : r.greedy) {
      if (id == model_->config().eos_token_ids.at(0)) break;
      until_eos.push_back(id);
    }
    std::string expected = tokenizer_->decode(until_eos, true);
    std::vector<GenerateRequest> requests = {{prompt, {}, 24}};
    EXPECT_EQ(scorer_->generate(requests)[0], expected);
    if (expected.size() > 8) {
      std::string stop = expected.substr(5, 2);
      std::vector<GenerateRequest> stopped = {{prompt, {"\x01never", stop}, 24}};
      EXPECT_EQ(scorer_->generate(stopped)[0], expected.substr(0, expected.find(stop)));
    }
    std::vector<GenerateRequest> short_one = {{prompt, {}, 3}};
    EXPECT_EQ(scorer_->generate(short_one)[0],
              tokenizer_->decode(
                  std::vector<int32_t>(until_eos.begin(),
                                       until_eos.begin() + std::min<size_t>(3, until_eos.size())),
                  true));
    checked++;
  }
  EXPECT_GE(checked, 1) << "no oracle prompt round-trips through the tokenizer";
}

TEST_F(TeacherForcedScorerTest, RollingNllAgreesWithTheEnginesPerplexity) {
  std::string text;
  for (int i = 0; i < 6; i++)
    text += "In the beginning was the word, and the word was with the light. ";
  std::vector<int32_t> ids = tokenizer_->encode(text, false);
  ASSERT_GT(ids.size(), 40u);
  std::vector<WindowNll> windows = scorer_->rolling_nll(text, 16, std::nullopt);
  size_t full = ids.size() / 16, rest = ids.size() % 16;
  EXPECT_EQ(windows.size(), full + (rest >= 2 ? 1 : 0));
  double total = 0;
  int64_t scored = 0;
  for (const WindowNll& w : windows) total += w.total_nll, scored += w.num_scored;
  PerplexityResult reference = perplexity(*model_, *backend_, ids, 16);
  EXPECT_EQ(scored, reference.num_scored);
  // Both f32 forwards; they differ only in how many rows each GEMM gets (len − 1 or len).
  EXPECT_NEAR(total / double(scored), reference.mean_nll, 1e-6 * reference.mean_nll);
  EXPECT_EQ(windows[0].num_scored, 15);
  EXPECT_EQ(scorer_->rolling_nll(text, 16, 2).size(), 2u);
}

TEST(TeacherForcedScorerContext, LongRequestsDropTheOldestContextTokens) {
  // The oracle model with a context of 16 positions (its llama3 RoPE does not depend on it).
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "tandem_eval_short_llama";
  std::filesystem::create_directories(dir);
  for (const char* f :
       {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    std::filesystem::copy_file(oracle_dir() / f, dir / f,
                               std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(oracle_dir() / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["max_position_embeddings"] = 16;
  std::ofstream(dir / "config.json") << config.dump();

  auto backend = make_cpu_backend();
  auto short_model = load_model(dir, *backend);
  auto full_model = load_model(oracle_dir(), *backend);
  auto tok = Tokenizer::load(oracle_dir());
  TeacherForcedScorer short_scorer(*short_model, *backend, tok),
      full_scorer(*full_model, *backend, tok);
  std::vector<OracleRun> runs = load_runs();
  const OracleRun& r = runs[3];  // a 47-token prompt
  std::vector<int32_t> continuation(r.greedy.begin(), r.greedy.begin() + 4);
  // 16 positions hold the 4 − 1 fed continuation tokens and the last 13 context tokens.
  std::vector<int32_t> kept(r.prompt.end() - 13, r.prompt.end());
  Loglikelihood got = short_scorer.score_tokens(r.prompt, continuation);
  Loglikelihood want = full_scorer.score_tokens(kept, continuation);
  EXPECT_DOUBLE_EQ(got.logprob, want.logprob);
  std::vector<int32_t> too_long(16, r.greedy[0]);
  EXPECT_THROW(short_scorer.score_tokens(r.prompt, too_long), Error);
}

}  // namespace teacher_forced_scorer_test
}  // namespace tandem::eval
