// The load generator against tandem's own HTTP server, in-process on a free port, serving
// the tiny oracle llama: every request gets exactly output_len tokens, timings are
// consistent, and failures (a bad request, no server) become error records, not throws.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <random>

#include "cli/bench/load_gen.h"
#include "cli/bench/workload.h"
#include "core/error.h"
#include "engine/engine.h"
#include "local_server.h"

namespace tandem::cli::bench {
namespace bench_e2e_test {

const char* kLlama = TANDEM_TEST_DATA "/oracle/llama";

using test::LocalServer;

class BenchE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineConfig config;
    config.scheduler.max_rows = 4;
    config.max_model_len = 256;
    config.served_model_name = "oracle-llama";
    server_ = new LocalServer(kLlama, config);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static LocalServer* server_;
};
LocalServer* BenchE2E::server_ = nullptr;

constexpr int kOutputLen = 6;

void expect_clean_run(const LoadResult& result, const LoadPlan& plan) {
  ASSERT_EQ(result.records.size(), plan.prompts.size());
  EXPECT_GT(result.duration_s, 0);
  for (const RequestRecord& r : result.records) {
    EXPECT_TRUE(r.ok) << "request " << r.index << ": " << r.error;
    EXPECT_EQ(r.num_output_tokens, kOutputLen) << "request " << r.index;
    EXPECT_EQ(r.num_prompt_tokens, int(plan.prompts[size_t(r.index)].size()));
    EXPECT_FALSE(r.arrivals_s.empty()) << "request " << r.index;
    EXPECT_LE(int(r.arrivals_s.size()), kOutputLen);
    EXPECT_GT(r.ttft_s, 0);
    EXPECT_LE(r.ttft_s, r.e2e_s);
    EXPECT_TRUE(std::is_sorted(r.arrivals_s.begin(), r.arrivals_s.end()));
    EXPECT_LE(r.start_s + r.e2e_s, result.duration_s + 1e-9);
  }
  RunSummary s = summarize(result.records, plan.concurrency, std::nullopt, result.duration_s);
  EXPECT_EQ(s.num_errors, 0);
  EXPECT_GT(s.requests_per_s, 0);
  EXPECT_GT(s.output_tokens_per_s, 0);
  EXPECT_EQ(s.total_output_tokens, int64_t(kOutputLen) * int64_t(plan.prompts.size()));
}

TEST_F(BenchE2E, ClosedLoopAtConcurrencyOneAndFour) {
  Endpoint endpoint = parse_endpoint(server_->url() + "/v1/");
  RequestShape shape;
  shape.model = discover_model(endpoint);
  EXPECT_EQ(shape.model, "oracle-llama");
  shape.max_tokens = kOutputLen;
  std::mt19937_64 rng(0);
  for (int concurrency : {1, 4}) {
    LoadPlan plan;
    plan.concurrency = concurrency;
    plan.prompts = random_prompts(rng, 6, 10, 100, 500);
    LoadResult result = run_load(endpoint, shape, plan);
    SCOPED_TRACE("concurrency " + std::to_string(concurrency));
    expect_clean_run(result, plan);
  }
  EXPECT_GE(server_->engine().stats().requests_finished, 12);
}

TEST_F(BenchE2E, PoissonArrivalsWaitForTheirTime) {
  Endpoint endpoint = parse_endpoint(server_->url());
  RequestShape shape;
  shape.model = "oracle-llama";
  shape.max_tokens = kOutputLen;
  std::mt19937_64 rng(1);
  LoadPlan plan;
  plan.concurrency = 4;
  plan.prompts = random_prompts(rng, 5, 8, 100, 500);
  plan.send_at_s = poisson_schedule(rng, 5, 40.0);
  int last_done = 0;
  LoadResult result = run_load(endpoint, shape, plan, [&](int done, int total, int errors) {
    EXPECT_EQ(done, last_done + 1);
    EXPECT_EQ(total, 5);
    EXPECT_EQ(errors, 0);
    last_done = done;
  });
  EXPECT_EQ(last_done, 5);
  expect_clean_run(result, plan);
  for (const RequestRecord& r : result.records)
    EXPECT_GE(r.start_s, plan.send_at_s[size_t(r.index)] - 1e-6) << "request " << r.index;
}

TEST_F(BenchE2E, RejectedRequestsAreErrorsAndTheRunGoesOn) {
  Endpoint endpoint = parse_endpoint(server_->url());
  RequestShape shape;
  shape.model = "oracle-llama";
  shape.max_tokens = 3;
  LoadPlan plan;
  plan.concurrency = 2;
  plan.prompts = {{100, 101}, {100, 99999}, {102, 103}};  // 99999 is past the 512-token vocabulary
  LoadResult result = run_load(endpoint, shape, plan);
  ASSERT_EQ(result.records.size(), 3u);
  EXPECT_TRUE(result.records[0].ok) << result.records[0].error;
  EXPECT_FALSE(result.records[1].ok);
  EXPECT_EQ(result.records[1].error.rfind("HTTP 400", 0), 0u) << result.records[1].error;
  EXPECT_TRUE(result.records[2].ok) << result.records[2].error;
  EXPECT_EQ(summarize(result.records, 2, std::nullopt, result.duration_s).num_errors, 1);
}

TEST(BenchLoad, NoServerMeansConnectionErrors) {
  Endpoint endpoint = parse_endpoint("http://127.0.0.1:1");  // nothing listens on port 1
  endpoint.timeout_s = 2;
  RequestShape shape;
  shape.model = "m";
  LoadPlan plan;
  plan.concurrency = 2;
  plan.prompts = {{1, 2}, {3, 4}};
  LoadResult result = run_load(endpoint, shape, plan);
  for (const RequestRecord& r : result.records) {
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error.rfind("connection", 0), 0u) << r.error;
  }
}

TEST(BenchLoad, EndpointAndBody) {
  Endpoint a = parse_endpoint("http://localhost:8000/v1/");
  EXPECT_EQ(a.origin, "http://localhost:8000");
  EXPECT_EQ(a.prefix, "");
  Endpoint b = parse_endpoint("https://example.com/proxy/v1");
  EXPECT_EQ(b.origin, "https://example.com");
  EXPECT_EQ(b.prefix, "/proxy");
  EXPECT_THROW(parse_endpoint("localhost:8000"), Error);
  EXPECT_THROW(parse_endpoint("http:///v1"), Error);

  RequestShape shape;
  shape.model = "m";
  shape.max_tokens = 5;
  auto body = nlohmann::json::parse(completion_body(shape, {7, 8}));
  EXPECT_EQ(body["prompt"], nlohmann::json({7, 8}));
  EXPECT_EQ(body["max_tokens"], 5);
  EXPECT_EQ(body["min_tokens"], 5);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  shape.force_length = false;
  body = nlohmann::json::parse(completion_body(shape, {7}));
  EXPECT_FALSE(body.contains("min_tokens"));
  EXPECT_FALSE(body.contains("ignore_eos"));
  // --models: request i names models[i % n], so the requests spread evenly.
  EXPECT_EQ(nlohmann::json::parse(completion_body(shape.for_request(3), {7}))["model"], "m");
  shape.models = {"a", "b", "c"};
  for (int i = 0; i < 6; i++)
    EXPECT_EQ(nlohmann::json::parse(completion_body(shape.for_request(i), {7}))["model"],
              shape.models[size_t(i % 3)]);
}

TEST(BenchWorkload, PromptsAndScheduleAreSeededAndInRange) {
  std::mt19937_64 a(5), b(5);
  auto pa = random_prompts(a, 3, 20, 100, 110);
  auto pb = random_prompts(b, 3, 20, 100, 110);
  EXPECT_EQ(pa, pb);
  for (const auto& p : pa) {
    ASSERT_EQ(p.size(), 20u);
    for (int32_t id : p) {
      EXPECT_GE(id, 100);
      EXPECT_LT(id, 110);
    }
  }
  EXPECT_NE(pa[0], pa[1]);
  std::mt19937_64 r(3);
  std::vector<double> at = poisson_schedule(r, 2000, 100.0);
  EXPECT_EQ(at[0], 0.0);
  EXPECT_TRUE(std::is_sorted(at.begin(), at.end()));
  // 1999 exponential gaps of mean 10 ms: the total is 19.99 s ± a few percent.
  EXPECT_NEAR(at.back(), 19.99, 1.5);
}

}  // namespace bench_e2e_test
}  // namespace tandem::cli::bench
