// `tandem eval --url`: tandem serving the embedded tiny model to itself. The in-process
// (engine) run and the HTTP run of the same tasks give the same metrics and per-item
// log-likelihoods within 1e-3; a server without prompt logprobs runs only the generation
// tasks; 5xx answers are retried and a request that keeps failing is a clear error.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

#include "cli/commands.h"
#include "core/error.h"
#include "eval/http_scorer.h"
// httplib with the feature macros the library was built with, before local_server.h.
#include "server/http/httplib_types.h"
#include "local_server.h"

namespace tandem {
namespace eval_url_test {

std::filesystem::path scratch() {
  auto dir = std::filesystem::temp_directory_path() / "tandem_eval_url";
  std::filesystem::create_directories(dir);
  return dir;
}

nlohmann::json run_eval_json(cli::EvalOptions o, const std::string& name) {
  o.json = (scratch() / name).string();
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int rc = cli::run_eval(o);
  testing::internal::GetCapturedStdout();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 0) << err;
  return nlohmann::json::parse(std::ifstream(*o.json));
}

TEST(EvalUrl, InProcessAndUrlRunsAgreeOnTheTinyModel) {
  EngineConfig config;
  config.scheduler.max_rows = 8;
  test::LocalServer server(cli::default_model_dir(), config);
  cli::EvalOptions o;
  o.model = cli::default_model_dir();
  o.device = "cpu";
  o.tasks = {"kjv_next_verse", "proverbs_cloze", "kjv_verse_end", "valid_perplexity"};
  o.limit = 12;  // items; windows for the perplexity task
  o.batch = "8";
  const nlohmann::json local = run_eval_json(o, "local.json");
  cli::EvalOptions u = o;
  u.model.clear();  // the server's first model
  u.url = server.url() + "/v1";
  u.batch = "auto";
  u.concurrency = 4;
  const nlohmann::json remote = run_eval_json(u, "remote.json");

  ASSERT_EQ(local["results"].size(), 4u);
  ASSERT_EQ(remote["results"].size(), 4u);
  for (size_t t = 0; t < 4; t++) {
    const auto& a = local["results"][t];
    const auto& b = remote["results"][t];
    SCOPED_TRACE(a["task"].get<std::string>());
    EXPECT_EQ(a["task"], b["task"]);
    EXPECT_EQ(a["n"], b["n"]);
    for (const auto& [name, m] : a["metrics"].items())
      EXPECT_NEAR(m["value"].get<double>(), b["metrics"][name]["value"].get<double>(), 1e-6) << name;
    if (a.contains("windows")) {
      ASSERT_EQ(a["windows"].size(), b["windows"].size());
      for (size_t w = 0; w < a["windows"].size(); w++) {
        EXPECT_EQ(a["windows"][w]["scored"], b["windows"][w]["scored"]);
        EXPECT_NEAR(a["windows"][w]["nll"].get<double>(), b["windows"][w]["nll"].get<double>(), 1e-2);
      }
      continue;
    }
    ASSERT_EQ(a["items"].size(), b["items"].size());
    for (size_t i = 0; i < a["items"].size(); i++) {
      const auto& x = a["items"][i];
      const auto& y = b["items"][i];
      if (x.contains("output")) {
        EXPECT_EQ(x["output"], y["output"]) << "item " << i;
        continue;
      }
      ASSERT_EQ(x["logprobs"].size(), y["logprobs"].size());
      for (size_t k = 0; k < x["logprobs"].size(); k++)
        EXPECT_NEAR(x["logprobs"][k].get<double>(), y["logprobs"][k].get<double>(), 1e-3)
            << "item " << i << " choice " << k;
    }
  }
}

// A server with plain completions only (no echo logprobs, no /tokenize) whose first
// answers to each completion are 503s.
class PlainServer {
 public:
  explicit PlainServer(int num_failures) : failures_left_(num_failures) {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"data": [{"id": "plain"}]})", "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      nlohmann::json body = nlohmann::json::parse(req.body);
      if (failures_left_-- > 0) {
        res.status = 503;
        res.set_content(R"({"error": {"message": "busy"}})", "application/json");
        return;
      }
      if (body.value("echo", false)) {
        res.status = 400;
        res.set_content(R"({"error": {"message": "echo is not supported"}})", "application/json");
        return;
      }
      nlohmann::json answer = {{"choices", {{{"text", " says " + body["prompt"].get<std::string>()}}}}};
      res.set_content(answer.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~PlainServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  std::atomic<int> failures_left_;
  int port_ = 0;
  std::thread thread_;
};

TEST(EvalUrl, APlainServerRunsGenerationOnlyAndRetries5xx) {
  PlainServer plain(/*num_failures=*/2);  // the probe's first two attempts
  eval::HttpScorer scorer({.url = plain.url(), .concurrency = 2});
  EXPECT_EQ(scorer.model(), "plain");
  EXPECT_FALSE(scorer.offers_prompt_logprobs());
  EXPECT_FALSE(scorer.offers_tokenize());
  std::vector<eval::GenerateRequest> gs = {{"a", {}, 4}, {"b", {}, 4}, {"c", {}, 4}};
  EXPECT_EQ(scorer.generate(gs), (std::vector<std::string>{" says a", " says b", " says c"}));
  EXPECT_THROW(scorer.loglikelihood(std::vector<eval::LoglikelihoodRequest>{{"x", " y"}}), Error);
}

TEST(EvalUrl, ARequestThatKeepsFailingIsAClearError) {
  PlainServer plain(/*num_failures=*/1000);
  eval::HttpScorer scorer({.url = plain.url(), .model = "plain", .max_attempts = 2});
  try {
    scorer.generate(std::vector<eval::GenerateRequest>{{"a", {}, 4}, {"b", {}, 4}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 of 2 requests"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("HTTP 503: busy"), std::string::npos) << e.what();
  }
}

TEST(EvalUrl, NoServerIsAClearError) {
  cli::EvalOptions o;
  o.url = "http://127.0.0.1:9";  // discard: nothing listens
  o.tasks = {"kjv_verse_end"};
  o.limit = 1;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli::run_eval(o), 1);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("could not connect"), std::string::npos);
}

}  // namespace eval_url_test
}  // namespace tandem
