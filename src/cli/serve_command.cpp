// `tandem serve`: the HTTP server over the engine. It listens at once (/health answers
// 503 while the model loads), then prints a ready card; SIGINT/SIGTERM drain in-flight
// requests and exit cleanly, and a second SIGINT/SIGTERM exits at once (130/143). SIGHUP
// is a no-op (there is no configuration to reload; a closed terminal must not end the
// requests in flight), noted on stderr.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>

#include "cli/commands.h"
#include "cli/limit_flags.h"
#include "cli/model_files.h"
#include "cli/stats_log.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "server/common/pooling_config.h"
#include "server/common/reasoning_setup.h"
#include "server/http_server.h"

namespace tandem::cli {
namespace {

std::atomic<server::HttpServer*> g_server{nullptr};

// Async-signal-safe: an atomic store, write(2) and _exit(2) only.
void on_signal(int sig) {
  server::HttpServer* s = g_server;
  if (s && s->stop_requested()) _exit(128 + sig);  // asked twice: no more draining
  if (s) s->request_stop();
  static const char kNote[] = "tandem: stopping (finishing requests in flight; again to force)\n";
  [[maybe_unused]] ssize_t r = ::write(STDERR_FILENO, kNote, sizeof(kNote) - 1);
}

void on_hangup(int) {
  static const char kNote[] = "tandem: SIGHUP ignored (nothing to reload)\n";
  [[maybe_unused]] ssize_t r = ::write(STDERR_FILENO, kNote, sizeof(kNote) - 1);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_hangup;
  sigaction(SIGHUP, &sa, nullptr);
  sa.sa_handler = SIG_IGN;  // a write to a closed stderr pipe must not end the server
  sigaction(SIGPIPE, &sa, nullptr);
}

void print_ready_card(const Engine& engine, const ServeOptions& o, const BatchChoice& batch,
                      const std::string& device, int port, int64_t kv_bytes,
                      const std::string& weight_format, const std::string& task,
                      const std::string& images,
                      const std::optional<SpeculativeConfig>& speculative) {
  const ModelInfo& info = engine.model_info();
  fmt::print(stderr,
             "tandem ready\n"
             "  model        {} ({})\n"
             "  parameters   {:.1f}M, {} on {}\n"
             "  weights      {}\n"
             "  context      {} tokens\n"
             "  KV cache     {:.1f} MiB {}, {} blocks of {} tokens\n"
             "  batch        {}\n"
             "  prefix cache {}\n"
             "  task         {}\n"
             "  images       {}\n"
             "  speculative  {}\n"
             "  url          http://{}:{}/v1\n",
             info.name, o.model, double(info.num_parameters) / 1e6, info.dtype, device,
             weight_format, info.max_model_len, double(kv_bytes) / double(1 << 20),
             dtype_name(engine.kv_dtype()), engine.kv_blocks().capacity(), info.block_size,
             batch.reason, o.enable_prefix_caching ? "on" : "off (--no-enable-prefix-caching)",
             task, images,
             speculative ? speculative_summary(*speculative) : "off (--speculative-config)", o.host,
             port);
  if (!o.no_web_ui)
    fmt::print(stderr, "  web          http://{0}:{1}/ (chat), http://{0}:{1}/dashboard\n",
               o.host, port);
}

// --speculative-config as /stats shows it.
nlohmann::json speculative_json(const SpeculativeConfig& c) {
  nlohmann::json j = {{"method", spec_method_name(c.method)},
                      {"num_speculative_tokens", c.num_speculative_tokens},
                      {"adaptive", c.adaptive}};
  if (c.method == SpecMethod::Ngram) {
    j["prompt_lookup_max"] = c.prompt_lookup_max;
    j["prompt_lookup_min"] = c.prompt_lookup_min;
  } else {
    j["model"] = c.model;
  }
  return j;
}

// The LoRA room: --max-loras slots (at least one per --lora-modules entry) of rank
// --max-lora-rank (at least the entries'); with runtime updates, at least 4 slots of rank
// 16, so there is room to load adapters into.
LoraCapacity serve_lora_capacity(const ServeOptions& o, const std::vector<std::filesystem::path>& dirs) {
  const bool runtime = o.enable_lora_runtime_updates;
  int max_loras = std::max(o.max_loras, runtime && o.max_loras == 0 ? 4 : 0);
  int max_rank = std::max(o.max_lora_rank, runtime && o.max_lora_rank == 0 ? 16 : 0);
  return lora_capacity_for(dirs, max_loras, max_rank);
}

}  // namespace

int64_t parse_bytes(const std::string& text) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    fail("'{}' is not a size (e.g. 4GB, 512MiB, 1000000)", text);
  }
  std::string unit = text.substr(pos);
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  double scale = unit.empty() || unit == "B" ? 1
                 : unit == "KB" ? 1e3 : unit == "MB" ? 1e6 : unit == "GB" ? 1e9 : unit == "TB" ? 1e12
                 : unit == "KIB" ? 1024.0 : unit == "MIB" ? 1048576.0 : unit == "GIB" ? 1073741824.0 : -1;
  if (scale < 0 || value < 0) fail("'{}' is not a size (e.g. 4GB, 512MiB, 1000000)", text);
  return int64_t(value * scale);
}

int run_serve(const ServeOptions& o) {
  try {
    check_limits(o.limits);
    server::check_reasoning_parser_name(o.reasoning_parser);
    const BatchFlags batch_flags{.rows = parse_auto_count(o.batch, "--batch"),
                                 .tokens = parse_auto_count(o.max_batched_tokens,
                                                            "--max-batched-tokens")};
    const std::optional<DType> kv_dtype_flag = kv_cache_dtype_from_name(o.kv_cache_dtype);
    std::optional<SpeculativeConfig> speculative;
    if (o.speculative_config) speculative = parse_speculative_config(*o.speculative_config);
    server::ServerOptions so;
    so.host = o.host;
    so.port = o.port;
    so.api_key = o.api_key;
    so.served_model_name = o.served_model_name;
    so.log_requests = o.log_requests;
    so.limits = o.limits;
    if (!o.allowed_hosts.empty()) so.allowed_hosts = o.allowed_hosts;
    so.web_ui = !o.no_web_ui;
    so.lora_runtime_updates = o.enable_lora_runtime_updates;
    so.task = *server::serve_task_from_name(o.task);  // the flag's values are checked
    server::HttpServer http(so);
    http.start();
    g_server = &http;
    install_signal_handlers();
    fmt::print(stderr, "tandem: listening on http://{}:{} — loading {}\n", o.host, http.port(), o.model);

    // How /v1/embeddings pools, decided before the model loads (a folder it cannot serve fails
    // fast).
    std::optional<server::PoolingChoice> pooling;
    if (server::serves_embeddings(so.task)) pooling = server::choose_pooling(o.model, o.pooling);
    std::vector<std::pair<std::string, std::filesystem::path>> loras = parse_lora_modules(o.lora_modules);
    std::vector<std::filesystem::path> lora_dirs;
    for (auto& [name, dir] : loras) lora_dirs.push_back(dir);
    LoadedModel m = load_model_folder(o.model, o.device,
                                      LoadOptions{.online = online_quantization(o.quantization),
                                                  .lora = serve_lora_capacity(o, lora_dirs),
                                                  .tp = {.size = o.tensor_parallel_size}},
                                      o.tokenizer);
    if (!m.tokenizer)
      fail("{}: serving needs tokenizer.json in the model folder (or --tokenizer DIR)", o.model);
    if (speculative) load_draft_model(m, *speculative);
    EngineConfig config;
    config.scheduler.prompt_concurrency = o.prompt_concurrency;
    config.max_model_len = o.max_model_len;
    config.enable_prefix_caching = o.enable_prefix_caching;
    config.speculative = speculative;
    config.served_model_name =
        o.served_model_name.empty() ? default_served_name(o.model) : o.served_model_name;
    // Without --kv-budget the executor sizes the cache: every row at full length, within
    // what the device can spare after the weights.
    if (o.kv_budget) config.kv_budget_bytes = parse_bytes(*o.kv_budget);
    std::string device = m.backend->name();
    if (m.tp_ranks)  // the card's KV cache line is one rank's (docs/tensor-parallel.md)
      device += fmt::format(" x {} tensor-parallel ranks (KV cache per rank)", m.tp_ranks->size());
    BatchChoice batch;
    std::unique_ptr<Engine> engine = make_engine(m, config, kv_dtype_flag, batch_flags, &batch);
    for (auto& [name, dir] : loras) engine->load_lora(name, dir);
    engine->start();
    server::ServedModel served = server::load_served_model(
        tokenizer_source(o.model, o.tokenizer), *engine, m.tokenizer,
        {.reasoning_parser = o.reasoning_parser, .grammar = o.limits.request.grammar});
    if (pooling) served.pooling = pooling->pooling;
    const int64_t kv_budget = engine->kv_layout().budget_bytes;
    served.card = {{"batch", batch.rows},
                   {"max_batched_tokens", batch.tokens},
                   {"batch_choice", batch.reason},
                   {"kv_budget_bytes", kv_budget},
                   {"prefix_caching", o.enable_prefix_caching},
                   {"kv_cache_dtype", std::string(dtype_name(engine->kv_dtype()))},
                   {"device", device},
                   {"weight_format", m.weight_format},
                   {"task", o.task},
                   {"speculative_config",
                    speculative ? speculative_json(*speculative) : nlohmann::json()}};
    const std::string task_line = pooling
                                      ? fmt::format("{} (embeddings: {} pooling, from {})", o.task,
                                                    pooling_name(pooling->pooling), pooling->source)
                                      : o.task;
    if (pooling) served.card["pooling"] = pooling_name(pooling->pooling);
    const std::string images = served.images.summary();
    const std::string reasoning =
        served.reasoning ? std::string(served.reasoning->syntax->name) : "none";
    served.card["reasoning_parser"] = reasoning;
    http.set_ready(std::move(served));
    print_ready_card(*engine, o, batch, device, http.port(), kv_budget, m.weight_format, task_line,
                     images, speculative);
    fmt::print(stderr, "  reasoning    {}{}\n", reasoning,
               o.reasoning_parser == "auto" ? " (auto: from the chat template)" : "");
    {
      StatsLog running_log(*engine, std::chrono::seconds(10));
      http.wait();
    }
    g_server = nullptr;
    engine->stop(/*drain=*/true);
    fmt::print(stderr, "tandem: stopped\n");
    return 0;
  } catch (const Error& e) {
    g_server = nullptr;
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
