// offline_bench: the offline workloads of docs/benchmarking.md on either backend — every
// request submitted at once, the engine runs until all finish; output tok/s over the whole run
// (prefill included, as TensorRT-LLM's tables count it).
//   offline_bench MODEL_DIR|FILE.gguf [--device cuda|cpu] [--input 128] [--output 128] [--num 256]
//                 [--batch 256] [--max-batched-tokens 8192] [--repeat 1]
//                 [--kv-cache-dtype auto|fp8|fp8_e4m3] [--threads N] [--quantization fp8]
//                 [--speculative-config JSON]
// `--num 1 --batch 1 --input 128 --output 256` is decode-b1: it also prints the decode
// rate after the first token (the bandwidth-roofline comparison). With
// --speculative-config (n-gram or a draft model, as on `serve`) it also prints what
// speculation did: proposals, acceptance, tokens per verifying row.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/env_switches.h"
#include "cli/model_files.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "model/config.h"

using namespace tandem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// CPU time of every thread of the process: on a shared machine the wall clock counts the
// time other processes hold the cores, this does not (but it counts the pool's spinning).
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Options {
  std::string dir, device = "cuda", kv_cache_dtype = "auto", quantization = "none";
  std::optional<std::string> speculative;  // --speculative-config JSON
  int input = 128, output = 128, num = 256, batch = 256, max_batched_tokens = 8192, repeat = 1;
  int threads = 0;  // the CPU backend's pool (0: the physical cores)
  int tensor_parallel_size = 1;  // ranks: CPU threads, or GPUs through NCCL
};

Options parse(int argc, char** argv) {
  Options o;
  o.dir = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--device") o.device = v;
    else if (k == "--input") o.input = std::stoi(v);
    else if (k == "--output") o.output = std::stoi(v);
    else if (k == "--num") o.num = std::stoi(v);
    else if (k == "--batch") o.batch = std::stoi(v);
    else if (k == "--max-batched-tokens") o.max_batched_tokens = std::stoi(v);
    else if (k == "--repeat") o.repeat = std::stoi(v);
    else if (k == "--kv-cache-dtype") o.kv_cache_dtype = v;
    else if (k == "--threads") o.threads = std::stoi(v);
    else if (k == "--quantization") o.quantization = v;
    else if (k == "--speculative-config") o.speculative = v;
    else if (k == "--tensor-parallel-size") o.tensor_parallel_size = std::stoi(v);
    else throw std::runtime_error("unknown option " + k);
  }
  return o;
}

// A prompt token id from x: in [100, min(vocab, 30000)), away from the special tokens.
int32_t token_of(uint64_t x, int vocab) {
  return int32_t(100 + x % uint64_t(std::max(1, std::min(vocab, 30000) - 100)));
}

// One run of o.num requests; returns output tokens per second over the whole run.
double run_once(Engine& engine, const Options& o, int vocab, uint64_t seed, bool print) {
  std::mt19937_64 rng(seed);
  std::vector<std::shared_ptr<RequestStream>> streams;
  auto start = Clock::now();
  const double cpu_start = cpu_seconds();
  for (int n = 0; n < o.num; n++) {
    GenerationRequest r;
    r.prompt.resize(size_t(o.input));
    for (auto& t : r.prompt) t = token_of(rng(), vocab);
    r.max_tokens = o.output;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    streams.push_back(engine.submit(r));
  }
  const int64_t before = engine.stats().generation_tokens_total;
  const int64_t prompt_before = engine.stats().prompt_tokens_total;
  const SpecDecodeStats spec_before = engine.stats().spec_decode;
  // The first output token: when a step() call first returns with more generated tokens
  // (with the overlapped loop a call issues step n+1 and waits for step n, so this is
  // when the step that produced it completed, not when it was issued).
  std::optional<Clock::time_point> first;
  double cpu_first = 0;
  int64_t after_first = before, prompt_at_first = prompt_before;
  // Step by step, so the run splits into steps that prefilled prompt tokens and pure
  // decode steps; a call's time is the device time of about one step.
  double prefill_s = 0, decode_s = 0, decode_cpu = 0;
  std::vector<double> decode_times;        // each decode step's seconds, in order
  std::vector<int64_t> decode_read_early;  // its step() call read the step in flight early
  int64_t prefill_steps = 0, decode_steps = 0, decode_rows = 0;
  for (;;) {
    const EngineStats s0 = engine.stats();
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    const bool worked = engine.step();
    const double dt = seconds_since(t0), dc = cpu_seconds() - c0;
    const EngineStats s1 = engine.stats();
    if (!first && s1.generation_tokens_total > before) {
      first = Clock::now();
      cpu_first = cpu_seconds();
      after_first = s1.generation_tokens_total;
      prompt_at_first = s1.prompt_tokens_total;
    }
    if (s1.prompt_tokens_total > s0.prompt_tokens_total) {
      prefill_s += dt, prefill_steps++;
    } else if (worked) {
      decode_s += dt, decode_cpu += dc, decode_steps++;
      decode_times.push_back(dt);
      decode_read_early.push_back(s1.spec_decode.num_steps_read_early -
                                  s0.spec_decode.num_steps_read_early);
      decode_rows += s1.num_running;
    }
    if (!worked && s1.num_running == 0 && s1.num_waiting == 0) break;
  }
  double total = seconds_since(start);
  const double cpu_total = cpu_seconds() - cpu_start;
  int64_t tokens = engine.stats().generation_tokens_total - before;
  for (auto& s : streams)
    while (auto c = s->pop(std::chrono::milliseconds(0)))
      if (c->finish && *c->finish == FinishReason::Error) throw std::runtime_error(c->error);
  if (print) {
    if (!first) first = Clock::now();  // no token generated
    const double after_s = seconds_since(*first);
    const double decode =
        after_s > 0 ? double(engine.stats().generation_tokens_total - after_first) / after_s : 0.0;
    fmt::print("  {} requests x {}/{}: {} output tokens in {:.3f} s = {:.0f} output tok/s"
               " (after the first token: {:.0f} tok/s); cpu time {:.3f} s\n",
               o.num, o.input, o.output, tokens, total, double(tokens) / total, decode, cpu_total);
    const double first_s = std::chrono::duration<double>(*first - start).count();
    fmt::print("  first token after {:.3f} s, {} prompt tokens done by then = {:.0f} prompt "
               "tok/s; cpu time {:.3f} s\n",
               first_s, prompt_at_first - prompt_before,
               first_s > 0 ? double(prompt_at_first - prompt_before) / first_s : 0.0,
               cpu_first - cpu_start);
    std::vector<double> sorted = decode_times;  // the decode steps' seconds, ascending
    std::sort(sorted.begin(), sorted.end());
    fmt::print("  steps with prompt tokens: {} in {:.2f} s; decode-only steps: {} in {:.2f} s"
               " ({:.2f} ms each, cpu {:.2f} ms, {:.0f} rows on average, slowest {:.2f} ms)\n",
               prefill_steps, prefill_s, decode_steps, decode_s,
               decode_steps ? 1e3 * decode_s / double(decode_steps) : 0.0,
               decode_steps ? 1e3 * decode_cpu / double(decode_steps) : 0.0,
               decode_steps ? double(decode_rows) / double(decode_steps) : 0.0,
               sorted.empty() ? 0.0 : 1e3 * sorted.back());
    // This run's share of the speculation counters: which run pays for what the controller
    // learns (the counters printed at the end are the whole process's).
    const SpecDecodeStats st = engine.stats().spec_decode;
    if (!st.method.empty())
      fmt::print("  this run: {} speculative steps, {} steps read early, {} verifying rows\n",
                 st.num_speculative_steps - spec_before.num_speculative_steps,
                 st.num_steps_read_early - spec_before.num_steps_read_early,
                 st.num_drafts - spec_before.num_drafts);
    // Where a run's decode time goes beyond its median step: the steps past 1.25x the
    // median (by position in the run; "r": its call read the step in flight early).
    if (!sorted.empty()) {
      const double median = sorted[sorted.size() / 2];
      std::string slow;
      double excess = 0;
      for (size_t i = 0; i < decode_times.size(); i++)
        if (decode_times[i] > 1.25 * median) {
          excess += decode_times[i] - median;
          if (slow.size() < 400)
            slow += fmt::format(" #{}{}:{:.1f}", i, decode_read_early[i] ? "r" : "",
                                1e3 * decode_times[i]);
        }
      fmt::print("  decode median {:.2f} ms, steps past 1.25x: {:.1f} ms over the median;{}\n",
                 1e3 * median, 1e3 * excess, slow);
    }
  }
  return double(tokens) / total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: offline_bench MODEL_DIR|FILE.gguf [--device cuda|cpu] "
                       "[--input N] [--output N] "
                       "[--num N] [--batch B] [--max-batched-tokens N] [--repeat R] "
                       "[--kv-cache-dtype auto|fp8|fp8_e4m3] [--threads N] [--quantization fp8] "
                       "[--speculative-config JSON] [--tensor-parallel-size N]\n");
    return 2;
  }
  try {
    Options o = parse(argc, argv);
    if (!cli::apply_process_switches(o.threads))
      return 1;  // --threads, TANDEM_THREADS, TANDEM_CPU_ISA
    const std::optional<DType> kv_dtype_flag = kv_cache_dtype_from_name(o.kv_cache_dtype);
    auto load_start = Clock::now();
    cli::LoadedModel m = cli::load_model_folder(
        o.dir, o.device,
        LoadOptions{.online = online_quantization(o.quantization),
                    .tp = {.size = o.tensor_parallel_size}});
    std::optional<SpeculativeConfig> speculative;
    if (o.speculative) {
      speculative = parse_speculative_config(*o.speculative);
      cli::load_draft_model(m, *speculative);
    }
    m.backend->synchronize();
    double load_s = seconds_since(load_start);
    int vocab = m.model->config().vocab_size;
    fmt::print("model {} ({:.2f}B params, {}) on {}: loaded in {:.1f} s\n", o.dir,
               double(m.model->num_parameters()) / 1e9, m.weight_format, m.backend->name(), load_s);
    if (m.tp_ranks)  // TANDEM_TP_EXECUTOR=1 at -tp 1 (docs/tensor-parallel.md)
      fmt::print("tensor-parallel executor: {} rank(s)\n", m.tp_ranks->size());
    if (m.backend->device() == Device::CPU)
      fmt::print("cpu: {} threads, {} kernels\n", ThreadPool::global().num_threads(),
                 cpu_isa_name(cpu_isa()));
    EngineConfig config;
    config.scheduler.max_rows = o.batch;
    config.scheduler.max_batched_tokens = o.max_batched_tokens;
    config.scheduler.prompt_concurrency = o.batch;
    config.max_model_len = o.input + o.output;
    config.speculative = speculative;
    const DType kv_dtype = kv_dtype_flag.value_or(m.backend->act_dtype());
    int64_t want = int64_t(std::min(o.num, o.batch)) * (o.input + o.output + 16);
    int64_t per_block = kv_bytes_per_block(m.model->kv_specs(), 16, kv_dtype);
    if (m.draft) per_block += kv_bytes_per_block(m.draft->kv_specs(), 16, kv_dtype);
    config.kv_budget_bytes = want * per_block / 16;
    const auto made = Clock::now();
    std::unique_ptr<Engine> owned = cli::make_engine(m, config, kv_dtype);  // env: graphs, overlap
    // KV allocation and, on a GPU, every decode graph's recording (engine/decode_graphs.h)
    fmt::print("engine ready in {:.2f} s\n", seconds_since(made));
    Engine& engine = *owned;
    Options warm = o;
    warm.num = std::min(o.num, 4);
    warm.output = std::min(o.output, 8);
    run_once(engine, warm, vocab, 99, false);
    std::vector<double> rates;
    for (int r = 0; r < o.repeat; r++)
      rates.push_back(run_once(engine, o, vocab, uint64_t(r), true));
    std::sort(rates.begin(), rates.end());
    fmt::print("offline-{}/{} num {} batch {}: {:.0f} output tok/s (median of {})\n", o.input,
               o.output, o.num, o.batch, rates[rates.size() / 2], rates.size());
    if (speculative) {
      const SpecDecodeStats st = engine.stats().spec_decode;
      fmt::print(
          "speculative {}: {} verifying rows, {} proposals, {} accepted ({:.1f}%), "
          "{:.2f} tokens per verifying row; {} speculative steps, {} steps read early\n",
          st.method, st.num_drafts, st.num_draft_tokens, st.num_accepted_tokens,
          st.num_draft_tokens ? 100.0 * double(st.num_accepted_tokens) / double(st.num_draft_tokens)
                              : 0.0,
          st.num_drafts ? 1.0 + double(st.num_accepted_tokens) / double(st.num_drafts) : 0.0,
          st.num_speculative_steps, st.num_steps_read_early);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
