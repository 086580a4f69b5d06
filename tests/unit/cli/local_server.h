// What `tandem serve` builds, for tests that talk HTTP to it: a model folder loaded the
// way the CLI loads it, the engine on its thread, and the HTTP server over it on a free
// loopback port. The served model's name is `config.served_model_name`.
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "cli/model_files.h"
#include "engine/engine.h"
#include "server/common/json_text.h"
#include "server/http_server.h"

namespace tandem::test {

// Runtime LoRA updates (--enable-lora-runtime-updates) and the room they load into.
struct LocalLoraRuntime {
  bool enabled = false;
  int max_loras = 0;
  int max_rank = 0;
};

class LocalServer {
 public:
  // `loras`: (name, folder) of PEFT adapters to serve, as --lora-modules name=DIR;
  // `arithmetic`: the CPU backend's on GGUF block weights, as TANDEM_CPU_BLOCK_ARITHMETIC.
  LocalServer(const std::filesystem::path& dir, EngineConfig config,
              const std::vector<std::pair<std::string, std::filesystem::path>>& loras = {},
              LocalLoraRuntime runtime = {},
              std::optional<cpu::BlockArithmetic> arithmetic = std::nullopt) {
    std::vector<std::filesystem::path> lora_dirs;
    for (auto& [name, d] : loras) lora_dirs.push_back(d);
    const LoraCapacity lora = cli::lora_capacity_for(lora_dirs, runtime.max_loras, runtime.max_rank);
    cli::LoadedModel m = cli::load_model_folder(dir, "cpu", LoadOptions{.lora = lora});
    if (arithmetic) dynamic_cast<CpuBackend&>(*m.backend).set_block_arithmetic(*arithmetic);
    if (config.speculative) cli::load_draft_model(m, *config.speculative);
    engine_ = cli::make_engine(m, std::move(config), std::nullopt);
    for (auto& [name, d] : loras) engine_->load_lora(name, d);
    engine_->start();
    server::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.limits.http.num_threads = 16;
    options.lora_runtime_updates = runtime.enabled;
    http_ = std::make_unique<server::HttpServer>(options);
    http_->start();
    server::ServedModel served = server::load_served_model(dir, *engine_, m.tokenizer);
    served.card = {{"weight_format", m.weight_format}};  // as serve's ready card names it
    http_->set_ready(std::move(served));
  }
  ~LocalServer() {
    http_->stop();
    engine_->stop(/*drain=*/false);
  }
  int port() const { return http_->port(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  const Engine& engine() const { return *engine_; }

  // /stats once the engine has retired every sequence (it frees blocks after the last
  // chunk is sent, so a reply can arrive a moment before the books are closed); the last
  // /stats read when that takes more than 5 s.
  server::Json settled_stats() const {
    httplib::Client client("127.0.0.1", port());
    server::Json stats;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
      auto res = client.Get("/stats");
      if (res && res->status == 200) stats = server::Json::parse(res->body);
      if (stats.is_object() && stats["kv_blocks"]["used"] == 0 && stats["running"] == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } while (std::chrono::steady_clock::now() < deadline);
    return stats;
  }

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::HttpServer> http_;
};

}  // namespace tandem::test
