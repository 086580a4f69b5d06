// The LoRA batch gate through `tandem serve` (issue 23): for every LoRA oracle folder
// (tests/data/oracle/lora/<arch>), the five prompts × {base model, each adapter} sent at
// once over HTTP to a server with --batch 16 and --lora-modules a=… b=…, each request
// selecting its adapter by "model", come back as the greedy continuations PEFT gave.
// /v1/models lists the base model and each adapter with its parent.
#include <gtest/gtest.h>

#include <algorithm>
#include <latch>
#include <thread>

#include "../unit/cli/local_server.h"
#include "loader/safetensors.h"
#include "lora_fixture.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace serve_lora_gate_test {

namespace fs = std::filesystem;
using server::Json;

struct Job {
  std::string model;
  std::vector<int32_t> prompt, want;
  int status = 0;
  std::string body;
};

class ServeLoraGate : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeLoraGate, EveryRowGetsItsAdaptersGreedy) {
  const std::string arch = GetParam();
  std::vector<std::pair<std::string, fs::path>> loras;
  for (auto& e : fs::directory_iterator(lora_root() / arch)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.starts_with("lora_")) loras.emplace_back(n.substr(5), e.path());
  }
  std::sort(loras.begin(), loras.end());
  ASSERT_FALSE(loras.empty());
  EngineConfig config;
  config.scheduler.max_rows = 16;
  config.max_model_len = 256;
  config.served_model_name = arch;
  LocalServer served(oracle_dir(arch), config, loras);

  auto golden = SafetensorsFile::open(lora_root() / arch / "lora_golden.safetensors");
  std::vector<OraclePrompt> prompts = load_oracle(arch);
  std::vector<Job> jobs;
  for (size_t i = 0; i < prompts.size(); i++) {
    jobs.push_back({arch, prompts[i].prompt, prompts[i].greedy});
    for (auto& [name, dir] : loras) {
      Tensor g = golden->tensor("greedy_" + name + "." + std::to_string(i));
      jobs.push_back({name, prompts[i].prompt,
                      std::vector<int32_t>(g.ptr<int32_t>(), g.ptr<int32_t>() + g.numel())});
    }
  }
  std::latch start(std::ptrdiff_t(jobs.size()));
  std::vector<std::thread> threads;
  for (Job& j : jobs)
    threads.emplace_back([&] {
      Json body = {{"model", j.model}, {"prompt", j.prompt}, {"max_tokens", j.want.size()},
                   {"temperature", 0}, {"ignore_eos", true}, {"return_token_ids", true}};
      httplib::Client client("127.0.0.1", served.port());
      client.set_read_timeout(120, 0);
      std::string text = body.dump();
      start.arrive_and_wait();
      if (auto res = client.Post("/v1/completions", text, "application/json"))
        j.status = res->status, j.body = res->body;
    });
  for (auto& t : threads) t.join();
  for (const Job& j : jobs) {
    ASSERT_EQ(j.status, 200) << j.model << ": " << j.body;
    Json r = Json::parse(j.body);
    EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<int32_t>>(), j.want) << j.model;
  }

  httplib::Client client("127.0.0.1", served.port());
  auto res = client.Get("/v1/models");
  ASSERT_TRUE(res && res->status == 200);
  Json data = Json::parse(res->body)["data"];
  ASSERT_EQ(data.size(), loras.size() + 1) << data.dump();
  EXPECT_EQ(data[0]["id"], arch);
  EXPECT_TRUE(data[0]["parent"].is_null());
  for (size_t a = 0; a < loras.size(); a++) {
    EXPECT_EQ(data[a + 1]["id"], loras[a].first);
    EXPECT_EQ(data[a + 1]["parent"], arch);
  }
  auto one = client.Get("/v1/models/" + loras[0].first);
  ASSERT_TRUE(one && one->status == 200);
  EXPECT_EQ(Json::parse(one->body)["parent"], arch);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ServeLoraGate, ::testing::ValuesIn(lora_archs()),
                         [](const auto& info) { return info.param; });

}  // namespace serve_lora_gate_test
}  // namespace tandem::test
