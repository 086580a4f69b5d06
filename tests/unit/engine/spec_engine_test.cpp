// Speculative decoding in the engine (issue 44; engine/speculator.h): rows that verify
// proposals emit exactly what they emit without speculation — greedy token for token, and
// seeded sampled rows with n-gram proposals bit for bit (the target's own draws decide) —
// with stops, length limits, min_tokens, penalties, logprobs, preemption, chunked prompts
// and the overlapped loop in play; rejected proposals leave no K/V behind (every block free
// at the end, and a prefix-cache hit on a speculating row's blocks gives the same output).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace tandem {
namespace spec_engine_test {

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
  std::optional<FinishReason> finish;
  int completion_tokens = -1;
};

Outcome collect(RequestStream& s) {
  Outcome o;
  while (auto c = s.pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) {
      o.tokens.push_back(t.token);
      o.logprobs.push_back(t.logprob);
      o.top.push_back(t.top_logprobs);
    }
    if (c->finish) {
      o.finish = c->finish;
      o.completion_tokens = c->completion_tokens;
    }
  }
  return o;
}

// A prompt that repeats a phrase, so the n-gram proposer finds what follows.
std::vector<int32_t> repetitive_prompt(int salt, int len = 40) {
  std::vector<int32_t> phrase;
  for (int i = 0; i < 7; i++) phrase.push_back(int32_t((i * 53 + salt * 31) % 480 + 10));
  std::vector<int32_t> p;
  for (int i = 0; i < len; i++) p.push_back(phrase[size_t(i) % phrase.size()]);
  return p;
}

SpeculativeConfig ngram(int k, bool adaptive = false) {
  return test::ngram_config(k, 1, 3, adaptive);
}

SpeculativeConfig draft_model(const char* arch, int k, bool adaptive = false) {
  SpeculativeConfig c;
  c.method = SpecMethod::DraftModel;
  c.model = arch;
  c.num_speculative_tokens = k;
  c.adaptive = adaptive;
  return c;
}

struct Result {
  std::vector<Outcome> out;
  EngineStats stats;
};

// An engine on the oracle model `arch`; with a draft-model config, the oracle model named by
// its `model` as the draft (they share the 512-token vocabulary).
std::unique_ptr<Engine> spec_engine(const char* arch, EngineConfig config) {
  if (!config.speculative || config.speculative->method != SpecMethod::DraftModel)
    return test::cpu_engine(arch, config);
  auto backend = make_cpu_backend();
  auto model = load_model(test::oracle_model(arch), *backend);
  auto draft = load_model(test::oracle_model(config.speculative->model.c_str()), *backend);
  return std::make_unique<Engine>(
      make_executor(std::move(backend), std::move(model), {}, std::move(draft)), nullptr, config);
}

Result run(const char* arch, EngineConfig config, const std::vector<GenerationRequest>& reqs) {
  auto engine = spec_engine(arch, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine->submit(r));
  engine->run_until_idle();
  EXPECT_EQ(engine->kv_blocks().num_used(), 0) << "KV blocks left behind";
  Result result;
  for (auto& s : streams) result.out.push_back(collect(*s));
  result.stats = engine->stats();
  return result;
}

EngineConfig config(int rows, std::optional<SpeculativeConfig> spec, Overlap overlap = Overlap::Off) {
  EngineConfig c;
  c.scheduler.max_rows = rows;
  c.overlap = overlap;
  c.speculative = std::move(spec);
  return c;
}

void expect_same(const std::vector<Outcome>& want, const std::vector<Outcome>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); i++) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(want[i].tokens, got[i].tokens);
    EXPECT_EQ(want[i].finish, got[i].finish);
    EXPECT_EQ(want[i].completion_tokens, got[i].completion_tokens);
    ASSERT_EQ(want[i].logprobs.size(), got[i].logprobs.size());
    for (size_t t = 0; t < want[i].logprobs.size(); t++) {
      EXPECT_NEAR(want[i].logprobs[t], got[i].logprobs[t], 1e-4) << "token " << t;
      ASSERT_EQ(want[i].top[t].size(), got[i].top[t].size()) << "token " << t;
      for (size_t k = 0; k < want[i].top[t].size(); k++)
        EXPECT_EQ(want[i].top[t][k].token, got[i].top[t][k].token) << "token " << t;
    }
  }
}

std::vector<GenerationRequest> greedy_requests(int n, int max_tokens) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; i++) reqs.push_back(test::greedy(repetitive_prompt(i, 20 + 5 * i), max_tokens));
  return reqs;
}

TEST(SpecEngine, NgramGreedyEmitsWhatThePlainEngineEmits) {
  const auto reqs = greedy_requests(6, 40);
  for (int rows : {1, 4}) {
    SCOPED_TRACE("max_rows " + std::to_string(rows));
    Result plain = run("llama", config(rows, std::nullopt), reqs);
    Result spec = run("llama", config(rows, ngram(4)), reqs);
    expect_same(plain.out, spec.out);
    const SpecDecodeStats& s = spec.stats.spec_decode;
    std::printf("[ measured ] n-gram K=4, %d rows: %lld drafts, %lld of %lld proposals accepted\n", rows,
                (long long)s.num_drafts, (long long)s.num_accepted_tokens, (long long)s.num_draft_tokens);
    EXPECT_TRUE(s.enabled);
    EXPECT_GT(s.num_drafts, 0);
    EXPECT_GT(s.num_accepted_tokens, 0) << "no proposal was ever accepted: the test proves little";
    EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);
    EXPECT_EQ(spec.stats.generation_tokens_total, plain.stats.generation_tokens_total);
    EXPECT_EQ(s.num_steps_read_early, 0);  // the serial loop has no step in flight to read
  }
}

// Seeded sampled rows (temperature, top-k/top-p/min-p, logprobs): with n-gram proposals
// every position is the target's own draw, so the tokens are the plain engine's, bit for
// bit; the stops, lengths and penalties of the mix cut accepted runs short.
std::vector<GenerationRequest> mixed_requests() {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; i++) {
    GenerationRequest r = test::greedy(repetitive_prompt(i, 18 + 3 * i), 30);
    r.sampling.temperature = i % 2 ? 0.7f : 0.f;
    r.sampling.seed = uint64_t(1000 + i);
    if (i == 1) r.sampling.top_p = 0.9f;
    if (i == 3) r.sampling.top_k = 5;
    if (i == 5) r.sampling.min_p = 0.05f;
    r.top_logprobs = i % 3 == 0 ? 3 : -1;
    reqs.push_back(r);
  }
  reqs[2].max_tokens = 3;  // ends inside a run of accepted proposals
  reqs[4].sampling.repetition_penalty = 1.2f;  // penalties count the proposals before each position
  reqs[4].sampling.frequency_penalty = 0.3f;
  reqs[6].sampling.presence_penalty = 0.5f;
  return reqs;
}

TEST(SpecEngine, NgramSeededSamplingIsBitIdentical) {
  const auto reqs = mixed_requests();
  Result plain = run("llama", config(4, std::nullopt), reqs);
  Result spec = run("llama", config(4, ngram(5)), reqs);
  expect_same(plain.out, spec.out);
  EXPECT_GT(spec.stats.spec_decode.num_accepted_tokens, 0);
  EXPECT_EQ(spec.out[2].tokens.size(), 3u);
}

// A stop token, found by the plain run, ends the speculating row at the same place: the
// proposals after it are not emitted, nor its own if min_tokens says not yet.
TEST(SpecEngine, StopTokensEndAcceptedRuns) {
  Result plain = run("llama", config(2, std::nullopt), greedy_requests(2, 30));
  for (int at : {5, 10, 20}) {
    std::vector<GenerationRequest> reqs = greedy_requests(2, 30);
    for (size_t i = 0; i < reqs.size(); i++) reqs[i].stop_token_ids = {plain.out[i].tokens[size_t(at)]};
    reqs[1].min_tokens = at + 2;
    Result want = run("llama", config(2, std::nullopt), reqs);
    Result got = run("llama", config(2, ngram(4)), reqs);
    expect_same(want.out, got.out);
    EXPECT_EQ(got.out[0].finish, FinishReason::Stop);
    EXPECT_LE(got.out[0].tokens.size(), size_t(at + 1));
  }
}

TEST(SpecEngine, PreemptionAndChunkedPromptsUnderKvPressure) {
  const auto reqs = greedy_requests(4, 40);
  for (const SpeculativeConfig& sc : {ngram(4), draft_model("llama", 3), draft_model("qwen3", 2)}) {
    SCOPED_TRACE(sc.model);
    EngineConfig tight = config(4, sc);
    // The draft's K/V shares the blocks (it is the size of the model here): the same bytes
    // hold half as many.
    const int blocks = sc.method == SpecMethod::Ngram ? 12 : 16;
    tight.kv_budget_bytes = blocks * test::kv_block_bytes("llama", DType::F32);
    tight.scheduler.max_batched_tokens = 16;
    EngineConfig plain_tight = tight;
    plain_tight.speculative.reset();
    Result want = run("llama", plain_tight, reqs);
    Result got = run("llama", tight, reqs);
    expect_same(want.out, got.out);
    EXPECT_GT(got.stats.num_preemptions, 0);
    EXPECT_GT(got.stats.spec_decode.num_draft_tokens, 0);
    if (sc.model != "qwen3") EXPECT_GT(got.stats.spec_decode.num_accepted_tokens, 0);
  }
}

TEST(SpecEngine, OverlappedLoopReadsSpeculatingStepsBeforePlanning) {
  const auto reqs = mixed_requests();
  Result serial = run("llama", config(3, std::nullopt), reqs);
  Result overlapped = run("llama", config(3, ngram(3), Overlap::On), reqs);
  expect_same(serial.out, overlapped.out);
  EXPECT_GT(overlapped.stats.spec_decode.num_accepted_tokens, 0);
  // Not adaptive: every plain step in flight with a row that may speculate is read early.
  EXPECT_GT(overlapped.stats.spec_decode.num_steps_read_early, 0);
  // Adaptive: whichever steps the measured costs read early, the tokens are the same.
  Result adaptive = run("llama", config(3, ngram(3, /*adaptive=*/true), Overlap::On), reqs);
  expect_same(serial.out, adaptive.out);
}

// Rejected proposals' K/V is never cached: the same requests again, served from the
// prefix cache the speculating rows filled, give the same tokens.
TEST(SpecEngine, PrefixCacheHoldsOnlyFinalTokens) {
  auto engine = test::cpu_engine("llama", config(4, ngram(4)));
  const auto reqs = greedy_requests(3, 40);
  std::vector<std::vector<int32_t>> first, again;
  for (int round = 0; round < 2; round++) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) {
      GenerationRequest longer = r;
      if (round == 1) {  // the prompt now runs into what the first round generated
        longer.prompt.insert(longer.prompt.end(), first[streams.size()].begin(), first[streams.size()].end() - 8);
        longer.max_tokens = 8;
      }
      streams.push_back(engine->submit(longer));
    }
    engine->run_until_idle();
    for (auto& s : streams) (round == 0 ? first : again).push_back(collect(*s).tokens);
  }
  EXPECT_GT(engine->stats().prefix_cache_hits_total, 0);
  for (size_t i = 0; i < reqs.size(); i++)
    EXPECT_EQ(again[i], std::vector<int32_t>(first[i].end() - 8, first[i].end())) << "request " << i;
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

// A draft model proposes: greedy rows emit the target's tokens whatever the draft says
// (a target drafting for itself has every proposal accepted), and seeded sampled rows keep
// their length limits and stay reproducible run to run.
TEST(SpecEngine, DraftModelGreedyEmitsWhatThePlainEngineEmits) {
  const auto reqs = greedy_requests(5, 30);
  Result plain = run("qwen2", config(4, std::nullopt), reqs);
  for (const char* draft : {"llama", "qwen2"}) {
    SCOPED_TRACE(draft);
    Result spec = run("qwen2", config(4, draft_model(draft, 3)), reqs);
    expect_same(plain.out, spec.out);
    const SpecDecodeStats& s = spec.stats.spec_decode;
    std::printf("[ measured ] draft %s for qwen2, K=3: %lld of %lld proposals accepted\n", draft,
                (long long)s.num_accepted_tokens, (long long)s.num_draft_tokens);
    EXPECT_GT(s.num_draft_tokens, 0);
    if (std::string(draft) == "qwen2") EXPECT_EQ(s.num_accepted_tokens, s.num_draft_tokens);
  }
}

TEST(SpecEngine, DraftModelSampledRowsAreReproducible) {
  const auto reqs = mixed_requests();
  Result a = run("qwen2", config(4, draft_model("llama", 3)), reqs);
  Result b = run("qwen2", config(4, draft_model("llama", 3)), reqs);
  expect_same(a.out, b.out);
  Result plain = run("qwen2", config(4, std::nullopt), reqs);
  for (size_t i = 0; i < reqs.size(); i++) {
    EXPECT_EQ(a.out[i].tokens.size(), plain.out[i].tokens.size()) << "request " << i;
    if (reqs[i].sampling.greedy())
      EXPECT_EQ(a.out[i].tokens, plain.out[i].tokens) << "request " << i;
  }
}

// Rows of two LoRA adapters and of the base model verify their proposals with their own
// adapter (the draft model runs without one): the same tokens as without speculation.
TEST(SpecEngine, LoraRowsVerifyWithTheirAdapter) {
  const std::filesystem::path adapters =
      std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "lora" / "llama";
  std::vector<GenerationRequest> reqs = greedy_requests(6, 30);
  for (size_t i = 0; i < reqs.size(); i++)
    if (i % 3) reqs[i].lora = i % 3 == 1 ? "a" : "b";
  auto outcomes = [&](std::optional<SpeculativeConfig> spec) {
    auto backend = make_cpu_backend();
    auto model = load_model(test::oracle_model("llama"), *backend,
                            LoadOptions{.lora = {.max_loras = 2, .max_rank = 8}});
    std::unique_ptr<Model> draft;
    if (spec && spec->method == SpecMethod::DraftModel)
      draft = load_model(test::oracle_model("llama"), *backend);
    Engine engine(make_executor(std::move(backend), std::move(model), {}, std::move(draft)),
                  nullptr, config(4, spec));
    engine.load_lora("a", adapters / "lora_a");
    engine.load_lora("b", adapters / "lora_b");
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) streams.push_back(engine.submit(r));
    engine.run_until_idle();
    if (spec) EXPECT_GT(engine.stats().spec_decode.num_accepted_tokens, 0);
    std::vector<Outcome> out;
    for (auto& st : streams) out.push_back(collect(*st));
    return out;
  };
  const std::vector<Outcome> plain = outcomes(std::nullopt);
  expect_same(plain, outcomes(ngram(4)));
  expect_same(plain, outcomes(draft_model("llama", 3)));  // base llama drafting for adapted rows
}

TEST(SpecEngine, ARequestCanOptOut) {
  auto reqs = greedy_requests(2, 30);
  for (auto& r : reqs) r.speculative = false;
  Result spec = run("llama", config(2, ngram(4)), reqs);
  EXPECT_EQ(spec.stats.spec_decode.num_drafts, 0);
  Result plain = run("llama", config(2, std::nullopt), reqs);
  expect_same(plain.out, spec.out);
}

// Sampling identity in distribution (issue 44): with a draft model proposing, the first
// three sampled tokens of seeded requests follow the target's joint distribution. 20,000
// requests (temperature 1, top-k 3: 27 joint outcomes) run on the tiny oracle llama without
// speculation, and 20,000 more (other seeds) with the oracle qwen2 drafting two tokens a
// step; a chi-square test of homogeneity over the joint outcomes passes at the 0.1% level.
// The same test with a deliberately wrong acceptance rule — the first proposal of every
// step taken whatever the target says (an executor that rewrites the sampling op's answer)
// — fails it: the test has the power to see a wrong rule.

constexpr int kRequests = 20000;
constexpr int kTokens = 3;

// The real executor, except that every chain of proposals has its first one accepted.
class FirstProposalAlwaysAccepted final : public Executor {
 public:
  explicit FirstProposalAlwaysAccepted(std::unique_ptr<Executor> inner)
      : inner_(std::move(inner)) {}
  const ExecutorInfo& info() const override { return inner_->info(); }
  KvRoom kv_room(const KvSizing& s) const override { return inner_->kv_room(s); }
  KvLayout allocate_kv(const KvSizing& s) override { return inner_->allocate_kv(s); }
  void prepare(int len, int rows) override { inner_->prepare(len, rows); }
  void issue_forward(const StepPlan& plan) override { inner_->issue_forward(plan); }
  void issue_sampling(std::span<const SampleRow> rows) override {
    std::vector<std::optional<int32_t>> forced(rows.size());
    for (size_t i = 0; i < rows.size(); i++)
      if (rows[i].draft && (i == 0 || !rows[i - 1].draft)) forced[i] = rows[i].draft->token;
    forced_.push_back(std::move(forced));
    inner_->issue_sampling(rows);
  }
  std::vector<GeneratedToken> take_prompt_logprobs() override {
    return inner_->take_prompt_logprobs();
  }
  std::vector<SampledToken> collect() override {
    std::vector<SampledToken> out = inner_->collect();
    const std::vector<std::optional<int32_t>> forced = std::move(forced_.front());
    forced_.erase(forced_.begin());
    for (size_t i = 0; i < out.size(); i++)
      if (forced[i]) out[i].token = *forced[i];
    return out;
  }
  void reset() override { inner_->reset(); }
  DraftProposals run_draft(const DraftStep& step) override { return inner_->run_draft(step); }
  LoraSlotImage lora_image(const PeftAdapter& a) const override { return inner_->lora_image(a); }
  void install_lora(int slot, const LoraSlotImage& image) override {
    inner_->install_lora(slot, image);
  }

 private:
  std::unique_ptr<Executor> inner_;
  std::vector<std::vector<std::optional<int32_t>>> forced_;  // per sampling op in flight
};

enum class Rule { None, Standard, Wrong };

// Joint outcome → count, over kRequests requests seeded from `first_seed` on.
std::map<std::vector<int32_t>, int> joint_counts(Rule rule, uint64_t first_seed) {
  auto backend = make_cpu_backend();
  auto model = load_model(test::oracle_model("llama"), *backend);
  std::unique_ptr<Model> draft;
  EngineConfig config;
  config.scheduler.max_rows = 512;
  config.scheduler.max_batched_tokens = 4096;
  config.max_model_len = 64;
  if (rule != Rule::None) {
    draft = load_model(test::oracle_model("qwen2"), *backend);
    config.speculative = SpeculativeConfig{.method = SpecMethod::DraftModel,
                                           .num_speculative_tokens = 2,
                                           .model = "qwen2",
                                           .adaptive = false};
  }
  std::unique_ptr<Executor> executor =
      make_executor(std::move(backend), std::move(model), {}, std::move(draft));
  if (rule == Rule::Wrong)
    executor = std::make_unique<FirstProposalAlwaysAccepted>(std::move(executor));
  Engine engine(std::move(executor), nullptr, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < kRequests; i++) {
    GenerationRequest r = test::greedy(test::prompt_of(20, 3), kTokens);
    r.sampling.temperature = 1.f;
    r.sampling.top_k = 3;
    r.sampling.seed = first_seed + uint64_t(i);
    streams.push_back(engine.submit(r));
  }
  engine.run_until_idle();
  if (rule != Rule::None) EXPECT_GT(engine.stats().spec_decode.num_draft_tokens, kRequests / 2);
  std::map<std::vector<int32_t>, int> counts;
  for (auto& s : streams) counts[test::drain(*s)]++;
  return counts;
}

// Pearson's chi-square statistic of homogeneity of two samples over their joint outcomes,
// and its degrees of freedom (outcomes − 1).
std::pair<double, int> homogeneity(const std::map<std::vector<int32_t>, int>& a,
                                   const std::map<std::vector<int32_t>, int>& b) {
  std::map<std::vector<int32_t>, std::pair<int, int>> cells;
  for (auto& [k, n] : a) cells[k].first = n;
  for (auto& [k, n] : b) cells[k].second = n;
  double na = 0, nb = 0;
  for (auto& [k, c] : cells) {
    na += c.first;
    nb += c.second;
  }
  double chi = 0;
  for (auto& [k, c] : cells) {
    const double total = c.first + c.second;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    chi += (c.first - ea) * (c.first - ea) / ea + (c.second - eb) * (c.second - eb) / eb;
  }
  return {chi, int(cells.size()) - 1};
}

// The upper 0.1% point of chi-square with `df` degrees of freedom (Wilson–Hilferty).
double critical_value(int df) {
  const double z = 3.0902;  // the standard normal's upper 0.1% point
  const double t = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - t + z * std::sqrt(t), 3.0);
}

TEST(SpecDistribution, DraftModelSamplingKeepsTheTargetsJointDistribution) {
  const auto plain = joint_counts(Rule::None, 1);
  const auto spec = joint_counts(Rule::Standard, 1 + kRequests);
  const auto [chi, df] = homogeneity(plain, spec);
  std::printf(
      "[ measured ] chi-square %.1f over %d degrees of freedom (0.1%% critical value %.1f)\n", chi,
      df, critical_value(df));
  EXPECT_GE(df, 8) << "too few joint outcomes for the test to mean much";
  EXPECT_LT(chi, critical_value(df));

  const auto wrong = joint_counts(Rule::Wrong, 1 + 2 * kRequests);
  const auto [wrong_chi, wrong_df] = homogeneity(plain, wrong);
  std::printf("[ measured ] with the first proposal always accepted: chi-square %.1f over %d\n",
              wrong_chi, wrong_df);
  EXPECT_GT(wrong_chi, critical_value(wrong_df)) << "the test cannot tell a wrong acceptance rule";
}

}  // namespace spec_engine_test
}  // namespace tandem
