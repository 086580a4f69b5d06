// Runtime LoRA updates through `tandem serve --enable-lora-runtime-updates` (issue 23):
// POST /v1/load_lora_adapter and /v1/unload_lora_adapter against the real server on the
// llama oracle and its PEFT adapters (tests/data/oracle/lora/llama). A loaded adapter gives
// PEFT's greedy continuation; after unloading, its name is a 404 model_not_found; a slot
// freed by an unload or a refused load takes the next adapter; an adapter with a live
// request is refused with 409 until the request ends; bad folders are 400s naming the
// cause; the server keeps serving and leaks no KV block.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <thread>

#include "../unit/cli/local_server.h"
#include "../unit/server/raw_http.h"
#include "loader/safetensors.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace serve_lora_runtime_test {

namespace fs = std::filesystem;
using server::Json;
using namespace std::chrono_literals;

fs::path adapter_dir(const std::string& name) {
  return fs::path(TANDEM_TEST_DATA) / "oracle" / "lora" / "llama" / ("lora_" + name);
}

std::vector<int32_t> golden_greedy(const std::string& adapter, int prompt) {
  auto golden = SafetensorsFile::open(fs::path(TANDEM_TEST_DATA) / "oracle" / "lora" / "llama" /
                                      "lora_golden.safetensors");
  Tensor g = golden->tensor("greedy_" + adapter + "." + std::to_string(prompt));
  return std::vector<int32_t>(g.ptr<int32_t>(), g.ptr<int32_t>() + g.numel());
}

struct Reply {
  int status = 0;
  std::string body;
  Json json() const { return Json::parse(body, nullptr, false); }
};

class Runtime : public ::testing::Test {
 protected:
  void serve(LocalLoraRuntime runtime) {
    EngineConfig config;
    config.scheduler.max_rows = 8;
    config.max_model_len = 4096;
    config.served_model_name = "llama";
    server_ = std::make_unique<LocalServer>(
        oracle_dir("llama"), config, std::vector<std::pair<std::string, fs::path>>{}, runtime);
  }
  Reply post(const std::string& path, const Json& body) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_read_timeout(120, 0);
    auto res = client.Post(path.c_str(), body.dump(), "application/json");
    return res ? Reply{res->status, res->body} : Reply{};
  }
  Reply load(const std::string& name, const fs::path& dir) {
    return post("/v1/load_lora_adapter", {{"lora_name", name}, {"lora_path", dir.string()}});
  }
  Reply unload(const std::string& name) {
    return post("/v1/unload_lora_adapter", {{"lora_name", name}});
  }
  Reply complete(const std::string& model, const std::vector<int32_t>& prompt, size_t n) {
    return post("/v1/completions", {{"model", model},
                                    {"prompt", prompt},
                                    {"max_tokens", n},
                                    {"temperature", 0},
                                    {"ignore_eos", true},
                                    {"return_token_ids", true}});
  }
  std::vector<int32_t> tokens_of(const Reply& r) {
    return r.json()["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  }
  std::vector<std::string> model_ids() {
    httplib::Client client("127.0.0.1", server_->port());
    auto res = client.Get("/v1/models");
    std::vector<std::string> ids;
    if (!res || res->status != 200) return ids;
    const Json models = Json::parse(res->body);
    for (const Json& m : models["data"]) ids.push_back(m["id"].get<std::string>());
    return ids;
  }
  void expect_no_kv_leak() {
    Json stats = server_->settled_stats();
    EXPECT_EQ(stats["kv_blocks"]["used"], 0) << stats.dump();
    EXPECT_EQ(stats["running"], 0) << stats.dump();
  }

  std::unique_ptr<LocalServer> server_;
};

TEST_F(Runtime, OffTheRoutesDoNotExist) {
  serve({.enabled = false, .max_loras = 2, .max_rank = 8});
  Reply r = load("a", adapter_dir("a"));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_TRUE(r.json().contains("error")) << r.body;
  EXPECT_EQ(unload("a").status, 404);
  EXPECT_EQ(model_ids(), std::vector<std::string>{"llama"});
}

TEST_F(Runtime, LoadUseUnloadReload) {
  serve({.enabled = true, .max_loras = 2, .max_rank = 8});
  const OraclePrompt p = load_oracle("llama")[0];
  Reply loaded = load("a", adapter_dir("a"));
  ASSERT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_EQ(loaded.body, "Success: LoRA adapter 'a' added successfully.");
  EXPECT_EQ(model_ids(), (std::vector<std::string>{"llama", "a"}));
  Reply with_a = complete("a", p.prompt, 24);
  ASSERT_EQ(with_a.status, 200) << with_a.body;
  EXPECT_EQ(tokens_of(with_a), golden_greedy("a", 0));
  EXPECT_EQ(tokens_of(complete("llama", p.prompt, 24)), p.greedy);

  Reply again = load("a", adapter_dir("b"));
  EXPECT_EQ(again.status, 400) << again.body;
  EXPECT_EQ(again.json()["error"]["param"], "lora_name");
  EXPECT_EQ(load("llama", adapter_dir("b")).status, 400);  // the base model's name

  Reply gone = unload("a");
  ASSERT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(gone.body, "Success: LoRA adapter 'a' removed successfully.");
  Reply after = complete("a", p.prompt, 4);
  EXPECT_EQ(after.status, 404) << after.body;
  EXPECT_EQ(after.json()["error"]["code"], "model_not_found");
  EXPECT_EQ(unload("a").status, 404);
  EXPECT_EQ(model_ids(), std::vector<std::string>{"llama"});

  // The freed slot takes the next adapter, whose weights replace all of the old ones.
  ASSERT_EQ(load("b", adapter_dir("b")).status, 200);
  ASSERT_EQ(load("a", adapter_dir("a")).status, 200);
  Reply full = load("c", adapter_dir("a"));
  EXPECT_EQ(full.status, 409) << full.body;
  EXPECT_EQ(full.json()["error"]["code"], "lora_slots_full");
  EXPECT_EQ(tokens_of(complete("b", p.prompt, 24)), golden_greedy("b", 0));
  EXPECT_EQ(tokens_of(complete("a", p.prompt, 24)), golden_greedy("a", 0));
  EXPECT_EQ(tokens_of(complete("llama", p.prompt, 24)), p.greedy);
  expect_no_kv_leak();
}

// Installs happen between steps into free slots: rows already running, with another
// adapter or none, go on exactly as they would have (the CPU's greedy is batch-invariant).
TEST_F(Runtime, LoadsWhileServingLeaveRunningRowsAlone) {
  serve({.enabled = true, .max_loras = 2, .max_rank = 8});
  ASSERT_EQ(load("a", adapter_dir("a")).status, 200);
  const OraclePrompt p = load_oracle("llama")[0];
  Reply with_a, base;
  std::thread ta([&] { with_a = complete("a", p.prompt, 600); });
  std::thread tb([&] { base = complete("llama", p.prompt, 600); });
  for (int k = 0; k < 5; k++) {
    EXPECT_EQ(load("b", adapter_dir("b")).status, 200);
    EXPECT_EQ(unload("b").status, 200);
  }
  ta.join();
  tb.join();
  ASSERT_EQ(with_a.status, 200) << with_a.body;
  ASSERT_EQ(base.status, 200) << base.body;
  std::vector<int32_t> a_ids = tokens_of(with_a), base_ids = tokens_of(base);
  ASSERT_EQ(a_ids.size(), 600u);
  const std::vector<int32_t> want_a = golden_greedy("a", 0);
  EXPECT_EQ(std::vector<int32_t>(a_ids.begin(), a_ids.begin() + long(want_a.size())), want_a);
  EXPECT_EQ(std::vector<int32_t>(base_ids.begin(), base_ids.begin() + long(p.greedy.size())),
            p.greedy);
  EXPECT_EQ(tokens_of(complete("a", p.prompt, 600)), a_ids);  // alone, nothing loading
  EXPECT_EQ(tokens_of(complete("llama", p.prompt, 600)), base_ids);
  expect_no_kv_leak();
}

// A copy of adapter `name` whose adapter_config.json claims rank `r`.
fs::path with_wrong_rank(const std::string& name, int r) {
  fs::path dir =
      fs::temp_directory_path() / ("tandem_lora_wrong_rank_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(adapter_dir(name) / "adapter_model.safetensors", dir / "adapter_model.safetensors",
                fs::copy_options::overwrite_existing);
  Json config = Json::parse(std::ifstream(adapter_dir(name) / "adapter_config.json"));
  config["r"] = r;
  std::ofstream(dir / "adapter_config.json") << config.dump();
  return dir;
}

TEST_F(Runtime, BadFoldersAre400sNamingTheCause) {
  serve({.enabled = true, .max_loras = 1, .max_rank = 4});
  auto refused = [&](const fs::path& dir, const std::string& cause) {
    Reply r = load("x", dir);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.json()["error"]["param"], "lora_path") << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(cause), std::string::npos)
        << r.body;
  };
  refused(oracle_dir("llama"), "adapter_config.json");  // a model folder, not an adapter
  refused(adapter_dir("nope"), "is " + adapter_dir("nope").string() + " a PEFT adapter folder");
  refused(adapter_dir("a"), "above the server's max LoRA rank 4");  // r = 8
  fs::path wrong = with_wrong_rank("b", 2);
  refused(wrong, "has rank 4 but the config gives it r = 2");
  fs::remove_all(wrong);
  EXPECT_EQ(post("/v1/load_lora_adapter", {{"lora_name", "x"}}).status, 400);  // no lora_path
  EXPECT_EQ(model_ids(), std::vector<std::string>{"llama"});
  // The refused loads gave their slot back: the one slot takes an adapter that fits.
  ASSERT_EQ(load("b", adapter_dir("b")).status, 200);
  const OraclePrompt p = load_oracle("llama")[0];
  EXPECT_EQ(tokens_of(complete("b", p.prompt, 24)), golden_greedy("b", 0));
  expect_no_kv_leak();
}

// A streaming completion held open on a raw socket: live in the engine until it has
// generated `max_tokens` or the socket closes (the server then cancels it).
class HeldStream {
 public:
  HeldStream(int port, const Json& body) : client_(std::make_unique<server::testing::RawClient>(port)) {
    const std::string text = body.dump();
    sent_ = client_->connected() &&
            client_->send("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                          "application/json\r\nContent-Length: " +
                          std::to_string(text.size()) + "\r\n\r\n" + text);
  }
  // Reads until the first SSE event has arrived (the request is running).
  bool wait_first_event() {
    return sent_ && client_ && client_->read_until("data:").find("data:") != std::string::npos;
  }
  void close() { client_.reset(); }

 private:
  std::unique_ptr<server::testing::RawClient> client_;
  bool sent_ = false;
};

TEST_F(Runtime, AnAdapterWithALiveRequestIsNotUnloaded) {
  serve({.enabled = true, .max_loras = 1, .max_rank = 8});
  ASSERT_EQ(load("a", adapter_dir("a")).status, 200);
  const OraclePrompt p = load_oracle("llama")[0];
  HeldStream live(server_->port(), {{"model", "a"},
                                    {"prompt", p.prompt},
                                    {"max_tokens", 4000},
                                    {"ignore_eos", true},
                                    {"stream", true}});
  ASSERT_TRUE(live.wait_first_event());
  Reply busy = unload("a");
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_EQ(busy.json()["error"]["code"], "lora_in_use");
  EXPECT_EQ(tokens_of(complete("llama", p.prompt, 24)), p.greedy);  // the base model serves on
  live.close();  // the server cancels the request, which gives the adapter back
  Reply freed;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((freed = unload("a")).status == 409 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(freed.status, 200) << freed.body;
  expect_no_kv_leak();
}

}  // namespace serve_lora_runtime_test
}  // namespace tandem::test
