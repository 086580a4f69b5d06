// The batch gate with speculative decoding (issue 44): for every oracle architecture, a
// server with --batch 8 and --speculative-config — n-gram proposals, or a draft model (another
// oracle model: they share the tokenizer) — returns, for all prompts sent at once, exactly
// the oracle's batched greedy continuations, which is what the same server gives without
// speculation (serve_batch_gate_test.cpp); also with --max-batched-tokens 16 (proposals ride
// beside prompt chunks), and under KV pressure (preemption). Sliding-window models run past
// their window. Structured output and stop strings give what the server without
// speculation gives. Afterwards every KV block is free and /stats and /metrics count the
// proposals.
#include <gtest/gtest.h>

#include <cstdio>
#include <latch>
#include <memory>
#include <thread>

#include "../unit/cli/local_server.h"
#include "engine/kv_layout.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace spec_serve_gate_test {

using server::Json;

const std::vector<std::string> kArchs = {"llama",   "qwen2",   "qwen3",  "mistral",
                                         "phi3",    "gemma2",  "gemma3", "qwen3_moe",
                                         "mixtral", "gemma3n", "gemma4", "gemma4_moe"};

// The draft of a target: another oracle architecture.
std::string draft_for(const std::string& arch) {
  return arch == "llama" ? "qwen3" : "llama";
}

SpeculativeConfig spec_config(const std::string& method, const std::string& arch) {
  SpeculativeConfig c;
  c.num_speculative_tokens = 4;
  c.adaptive = false;  // every row proposes whenever it can: the gate sees the most of it
  if (method == "ngram") {
    c.method = SpecMethod::Ngram;
    c.prompt_lookup_min = 1;
    c.prompt_lookup_max = 3;
  } else {
    c.method = SpecMethod::DraftModel;
    c.model = oracle_dir(draft_for(arch)).string();
  }
  return c;
}

std::unique_ptr<LocalServer> serve(const std::string& arch, int max_batched_tokens,
                                   std::optional<SpeculativeConfig> spec,
                                   std::optional<int64_t> kv_budget = std::nullopt) {
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = max_batched_tokens;
  config.max_model_len = 256;
  config.kv_budget_bytes = kv_budget;
  config.served_model_name = arch;
  config.speculative = std::move(spec);
  return std::make_unique<LocalServer>(oracle_dir(arch), config);
}

struct Reply {
  int status = 0;
  Json body;
};

// Posts every body at once (a latch lines the threads up) to `path`.
std::vector<Reply> post_all(int port, const std::string& path, const std::vector<Json>& bodies) {
  std::vector<Reply> replies(bodies.size());
  std::latch start(std::ptrdiff_t(bodies.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bodies.size(); ++i)
    threads.emplace_back([&, i] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(120, 0);
      const std::string text = bodies[i].dump();
      start.arrive_and_wait();
      auto res = client.Post(path, text, "application/json");
      if (res) replies[i] = {res->status, Json::parse(res->body, nullptr, false)};
    });
  for (auto& t : threads) t.join();
  return replies;
}

std::vector<Json> greedy_bodies(const std::vector<OraclePrompt>& prompts) {
  std::vector<Json> bodies;
  for (const OraclePrompt& p : prompts)
    bodies.push_back({{"prompt", p.prompt},
                      {"max_tokens", p.batch_greedy.size()},
                      {"temperature", 0},
                      {"ignore_eos", true},
                      {"return_token_ids", true}});
  return bodies;
}

void expect_batch_greedy(LocalServer& served, const std::vector<OraclePrompt>& prompts) {
  std::vector<Reply> replies = post_all(served.port(), "/v1/completions", greedy_bodies(prompts));
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    ASSERT_EQ(replies[i].status, 200) << replies[i].body.dump();
    EXPECT_EQ(replies[i].body["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
              prompts[i].batch_greedy);
    EXPECT_EQ(replies[i].body["usage"]["completion_tokens"], prompts[i].batch_greedy.size());
  }
}

// Every block free, the requests counted, and the proposals in /stats and /metrics.
void expect_settled(LocalServer& served, size_t requests) {
  Json stats = served.settled_stats();
  ASSERT_TRUE(stats.is_object());
  EXPECT_EQ(stats["kv_blocks"]["used"], 0) << stats.dump();
  EXPECT_EQ(stats["requests_finished"], requests) << stats.dump();
  const Json& spec = stats["speculative_decoding"];
  EXPECT_TRUE(spec["enabled"].get<bool>()) << stats.dump();
  EXPECT_GT(spec["draft_tokens_total"].get<int64_t>(), 0) << stats.dump();
  EXPECT_GE(spec["steps_read_early_total"].get<int64_t>(), 0) << stats.dump();  // it is there
  httplib::Client client("127.0.0.1", served.port());
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  for (const char* name :
       {"tandem:spec_decode_num_drafts_total", "tandem:spec_decode_num_draft_tokens_total",
        "tandem:spec_decode_num_accepted_tokens_total",
        "tandem:spec_decode_num_accepted_tokens_per_pos_total"})
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name;
}

struct GateCase {
  std::string arch;
  std::string method;  // ngram, draft
  int max_batched_tokens;
};

class SpecServeGate : public ::testing::TestWithParam<GateCase> {};

TEST_P(SpecServeGate, ConcurrentRequestsReturnBatchGreedy) {
  const GateCase& c = GetParam();
  std::vector<OraclePrompt> prompts = load_oracle(c.arch);
  ASSERT_FALSE(prompts.empty());
  auto served = serve(c.arch, c.max_batched_tokens, spec_config(c.method, c.arch));
  expect_batch_greedy(*served, prompts);
  expect_settled(*served, prompts.size());
}

std::vector<GateCase> cases() {
  std::vector<GateCase> out;
  for (const std::string& arch : kArchs)
    for (const char* method : {"ngram", "draft"})
      for (int budget : {2048, 16}) out.push_back({arch, method, budget});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Architectures, SpecServeGate, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.arch + "_" + info.param.method + "_budget" +
                                  std::to_string(info.param.max_batched_tokens);
                         });

// Too little KV for all prompts at once, through the server: every reply is still the
// oracle's greedy continuation and nothing stays allocated. Whether rows get preempted here
// depends on when the requests arrive, so it is printed, not asserted; the engine test
// SpecEngine.PreemptionAndChunkedPromptsUnderKvPressure forces preemption under speculation.
// (Mistral's sliding window bounds its KV: no pressure there. Gemma 2's full-attention
// layers need the longest prompt's blocks beside the window's, hence its larger budget.)
TEST(SpecServeGate, TightKvBudget) {
  for (const char* arch : {"llama", "qwen2", "gemma2"})
    for (const char* method : {"ngram", "draft"}) {
      SCOPED_TRACE(std::string(arch) + " " + method);
      std::vector<OraclePrompt> prompts = load_oracle(arch);
      auto backend = make_cpu_backend();
      auto model = load_model(oracle_dir(arch), *backend);
      auto draft = load_model(oracle_dir(draft_for(arch)), *backend);
      const int64_t block =
          kv_bytes_per_block(model->kv_specs(), 16, DType::F32) +
          (std::string(method) == "draft" ? kv_bytes_per_block(draft->kv_specs(), 16, DType::F32)
                                          : 0);
      const int blocks = std::string(arch) != "gemma2"    ? 12
                         : std::string(method) == "draft" ? 64
                                                          : 16;
      auto served = serve(arch, 2048, spec_config(method, arch), blocks * block);
      expect_batch_greedy(*served, prompts);
      Json stats = served->settled_stats();
      std::printf("[ measured ] %s %s: %lld preemptions\n", arch, method,
                  static_cast<long long>(stats["preemptions"].get<int64_t>()));
      expect_settled(*served, prompts.size());
    }
}

// Chat requests with a JSON schema, stop strings and sampling seeds: the speculating
// server answers each exactly as the plain one (n-gram: every token is the target's own
// draw; a draft model: greedy rows).
TEST(SpecServeGate, StructuredOutputAndStopStringsAsWithoutSpeculation) {
  const Json schema =
      Json::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
      "n":{"type":"integer","minimum":0,"maximum":99}},"required":["name","n"],"additionalProperties":false})");
  std::vector<Json> bodies;
  for (int i = 0; i < 6; i++) {
    Json b = {
        {"messages",
         Json::array({{{"role", "user"},
                       {"content", "say {\"name\":\"ab\",\"n\":3} again " + std::to_string(i)}}})},
        {"max_tokens", 40},
        {"temperature", i % 2 ? 0.8 : 0.0},
        {"seed", 7 + i}};
    if (i < 3)
      b["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "x"}, {"schema", schema}}}};
    else
      b["stop"] = Json::array({"e", "a b"});
    bodies.push_back(b);
  }
  for (const char* arch : {"llama", "mistral"}) {
    auto plain = serve(arch, 16, std::nullopt);
    const std::vector<Reply> want = post_all(plain->port(), "/v1/chat/completions", bodies);
    for (const char* method : {"ngram", "draft"}) {
      SCOPED_TRACE(std::string(arch) + " " + method);
      auto spec = serve(arch, 16, spec_config(method, arch));
      const std::vector<Reply> got = post_all(spec->port(), "/v1/chat/completions", bodies);
      for (size_t i = 0; i < bodies.size(); i++) {
        SCOPED_TRACE("request " + std::to_string(i));
        ASSERT_EQ(got[i].status, 200) << got[i].body.dump();
        ASSERT_EQ(want[i].status, 200) << want[i].body.dump();
        const Json& a = want[i].body["choices"][0];
        const Json& b = got[i].body["choices"][0];
        if (std::string(method) == "ngram" || bodies[i]["temperature"] == 0.0) {
          EXPECT_EQ(a["message"]["content"], b["message"]["content"]);
          EXPECT_EQ(a["finish_reason"], b["finish_reason"]);
        }
        if (i < 3) {
          EXPECT_TRUE(
              Json::parse(b["message"]["content"].get<std::string>(), nullptr, false).is_object())
              << b["message"]["content"];
        }
      }
      expect_settled(*spec, bodies.size());
    }
  }
}

}  // namespace spec_serve_gate_test
}  // namespace tandem::test
