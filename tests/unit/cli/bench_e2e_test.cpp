// The load generator against tandem's own HTTP server, in-process on a free port, serving
// the tiny oracle llama: every request gets exactly output_len tokens, timings are
// consistent, and failures (a bad request, no server) become error records, not throws.
//
// Then `tandem bench --image` (cli/bench/image_workload.h): the synthetic images decode, differ
// per request (and repeat with --same-image), --image-fraction spreads them evenly, and a
// run against a stand-in OpenAI server sends chat completions whose image_url parts the
// server decodes, counting prompt tokens from the server's usage.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench/image_workload.h"
#include "cli/bench/load_gen.h"
#include "cli/bench/workload.h"
#include "core/base64.h"
#include "core/error.h"
#include "engine/engine.h"
#include "local_server.h"
#include "media/content_hash.h"
#include "media/image_decode.h"
#include "server/http/httplib_types.h"

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

namespace tandem::cli::bench {
namespace bench_e2e_test {

using nlohmann::json;

// The images of one chat body, decoded.
std::vector<DecodedImage> body_images(const json& body) {
  std::vector<DecodedImage> out;
  for (const json& part : body["messages"][0]["content"]) {
    if (part["type"] != "image_url") continue;
    std::string url = part["image_url"]["url"];
    const std::string prefix = "data:image/png;base64,";
    EXPECT_EQ(url.rfind(prefix, 0), 0u);
    auto bytes = base64::decode(std::string_view(url).substr(prefix.size()));
    EXPECT_TRUE(bytes);
    out.push_back(decode_image(*bytes, MediaLimits{}));
  }
  return out;
}

const SipKey kKey = {1, 2};

TEST(BenchImages, SizesParse) {
  EXPECT_EQ(parse_image_size("896x896"), std::make_pair(896, 896));
  EXPECT_EQ(parse_image_size("640X480"), std::make_pair(640, 480));
  for (const char* bad : {"896", "896x", "x896", "0x10", "10x-1", "896x896x3", "99999x10", "a x b"})
    EXPECT_THROW(parse_image_size(bad), Error) << bad;
}

TEST(BenchImages, FractionSpreadsEvenly) {
  ImageWorkload w;
  w.width = w.height = 8;
  w.fraction = 0.5;
  int n = 0;
  for (int i = 0; i < 100; ++i) n += w.carries(i);
  EXPECT_EQ(n, 50);
  EXPECT_NE(w.carries(0), w.carries(1));
  EXPECT_TRUE(w.carries(-1));  // the warm-up request
  w.fraction = 0;
  EXPECT_FALSE(w.carries(-1));
  ImageWorkload off;
  EXPECT_FALSE(off.carries(0));
}

TEST(BenchImages, ChatBodiesCarryDistinctImagesUnlessAskedForTheSame) {
  RequestShape shape;
  shape.model = "m";
  shape.images = {
      .width = 40, .height = 24, .per_request = 2, .fraction = 1.0, .same_image = false, .seed = 9};
  EXPECT_STREQ(request_path(shape), "/v1/chat/completions");
  std::set<uint64_t> hashes;
  for (int i = 0; i < 4; ++i) {
    json body = json::parse(completion_body(shape, {5, 6, 7}, false, i));
    EXPECT_FALSE(body.contains("prompt"));
    EXPECT_EQ(body["messages"][0]["content"].back()["text"], prompt_words({5, 6, 7}));
    std::vector<DecodedImage> images = body_images(body);
    ASSERT_EQ(images.size(), 2u);
    for (const DecodedImage& d : images) {
      EXPECT_EQ(d.rgb.width, 40);
      EXPECT_EQ(d.rgb.height, 24);
      hashes.insert(content_hash(d.rgb, kKey));
    }
  }
  EXPECT_EQ(hashes.size(), 8u);  // no image repeats, within or across requests
  shape.images.same_image = true;
  std::set<uint64_t> same;
  for (int i = 0; i < 3; ++i)
    for (const DecodedImage& d : body_images(json::parse(completion_body(shape, {5}, false, i))))
      same.insert(content_hash(d.rgb, kKey));
  EXPECT_EQ(same.size(), 2u);  // the same two images in every request
  EXPECT_EQ(prompt_words({0, 1, 64}), "the of the");
}

// A stand-in server: streams a two-token chat answer and records the images it was sent.
class ImageHost : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req,
                                                httplib::Response& res) {
      json body = json::parse(req.body);
      std::vector<DecodedImage> images = body_images(body);
      {
        std::lock_guard<std::mutex> lock(mu_);
        num_images_.push_back(int(images.size()));
        for (const DecodedImage& d : images) hashes_.insert(content_hash(d.rgb, kKey));
      }
      std::string sse;
      for (const char* piece : {"Hel", "lo"})
        sse +=
            "data: " + json{{"choices", {{{"index", 0}, {"delta", {{"content", piece}}}}}}}.dump() +
            "\n\n";
      int prompt = 10 + 100 * int(images.size());
      sse += "data: " +
             json{{"choices", json::array()},
                  {"usage", {{"prompt_tokens", prompt}, {"completion_tokens", 2}}}}
                 .dump() +
             "\n\n";
      sse += "data: [DONE]\n\n";
      res.set_content(sse, "text/event-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<int> num_images_;
  std::set<uint64_t> hashes_;
};

TEST_F(ImageHost, ARunSendsImagesOnTheRequestsThatCarryThem) {
  Endpoint endpoint = parse_endpoint("http://127.0.0.1:" + std::to_string(port_));
  RequestShape shape;
  shape.model = "m";
  shape.max_tokens = 2;
  shape.images = {
      .width = 32, .height = 32, .per_request = 3, .fraction = 0.5, .same_image = false, .seed = 1};
  LoadPlan plan;
  plan.concurrency = 3;
  plan.prompts.assign(8, std::vector<int32_t>{1, 2, 3});
  LoadResult result = run_load(endpoint, shape, plan);
  ASSERT_EQ(result.records.size(), 8u);
  int with_images = 0;
  for (const RequestRecord& r : result.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.with_images, shape.images.carries(r.index));
    EXPECT_EQ(r.num_prompt_tokens, r.with_images ? 310 : 10);  // the server's count
    EXPECT_EQ(r.num_output_tokens, 2);
    EXPECT_EQ(r.arrivals_s.size(), 2u);
    with_images += r.with_images;
  }
  EXPECT_EQ(with_images, 4);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(std::count(num_images_.begin(), num_images_.end(), 3), 4);
  EXPECT_EQ(std::count(num_images_.begin(), num_images_.end(), 0), 4);
  EXPECT_EQ(hashes_.size(), 12u);
}

}  // namespace bench_e2e_test
}  // namespace tandem::cli::bench
