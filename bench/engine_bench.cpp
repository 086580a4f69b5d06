// engine_bench: CPU prefill and decode throughput of the engine on a model folder.
//   engine_bench MODEL_DIR [--prompt 128] [--new 64] [--batch 1,4,16]
// Prefill: one prompt of --prompt tokens through the runner (tok/s). Decode: B requests
// of --prompt tokens generating --new tokens each, all at once (--batch B), aggregate
// generated tok/s after their prefill. Random prompts, fixed seed, EOS ignored.
#include <fmt/format.h>

#include <chrono>
#include <random>
#include <sstream>

#include "cli/env_switches.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/teacher_forcing.h"
#include "model/config.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: engine_bench MODEL_DIR [--prompt N] [--new N] [--batch 1,4,16]\n");
    return 2;
  }
  std::string dir = argv[1];
  int prompt = 128, fresh = 64;
  std::vector<int> batches = {1, 4, 16};
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--prompt") prompt = std::stoi(v);
    else if (k == "--new") fresh = std::stoi(v);
    else if (k == "--batch") {
      batches.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) batches.push_back(std::stoi(x));
    }
  }
  if (!tandem::cli::apply_process_switches()) return 1;  // TANDEM_THREADS, TANDEM_CPU_ISA
  try {
    auto backend = make_cpu_backend();
    auto model = load_model(dir, *backend);
    int vocab = model->config().vocab_size;
    std::mt19937 rng(1);
    auto random_prompt = [&] {
      std::vector<int32_t> p(static_cast<size_t>(prompt));
      for (auto& t : p) t = int32_t(rng() % uint32_t(std::min(vocab, 30000)));
      return p;
    };
    auto warm = random_prompt();
    teacher_forced_logits(*model, *backend, std::span(warm).first(16));
    auto t0 = Clock::now();
    teacher_forced_logits(*model, *backend, warm, 512);
    double prefill = prompt / seconds_since(t0);
    fmt::print("model {}  params {:.1f}M  threads {}\n", dir, model->num_parameters() / 1e6,
               ThreadPool::global().num_threads());
    fmt::print("prefill  {} tokens: {:.0f} tok/s\n", prompt, prefill);
    fmt::print("{:>6} {:>14} {:>14}\n", "batch", "decode tok/s", "per row tok/s");
    for (int B : batches) {
      EngineConfig config;
      config.scheduler.max_rows = B;
      config.max_model_len = prompt + fresh;
      auto be = make_cpu_backend();
      auto m = load_model(dir, *be);
      Engine engine(make_executor(std::move(be), std::move(m)), nullptr, config);
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (int b = 0; b < B; b++) {
        GenerationRequest r;
        r.prompt = random_prompt();
        r.max_tokens = fresh;
        r.sampling.temperature = 0;
        r.ignore_eos = true;
        streams.push_back(engine.submit(r));
      }
      engine.step();  // prefills (and the first token of) every row
      auto start = Clock::now();
      int64_t before = engine.stats().generation_tokens_total;
      engine.run_until_idle();
      double secs = seconds_since(start);
      double rate = double(engine.stats().generation_tokens_total - before) / secs;
      fmt::print("{:>6} {:>14.1f} {:>14.1f}\n", B, rate, rate / B);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
