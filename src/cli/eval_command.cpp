// `tandem eval`: evaluation tasks (eval/tasks/*.jsonl, schema in eval/tasks/README.md) on a
// model in-process (batched through the engine, or the reference scorer) or on a server
// (--url): progress on stderr, the table on stdout, the raw numbers with --json.
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "engine/kv_layout.h"
#include "eval/engine_scorer.h"
#include "eval/evaluate.h"
#include "eval/http_scorer.h"
#include "eval/report.h"
#include "eval/task_reader.h"
#include "eval/teacher_forced_scorer.h"
#include "model/config.h"

namespace tandem::cli {

namespace {

std::filesystem::path default_tasks_dir() {
  // Beside the working directory first (a checkout), then where the build came from.
  if (std::filesystem::is_directory("eval/tasks")) return "eval/tasks";
  return TANDEM_DEFAULT_TASKS;
}

// --tasks entries: a path to a .jsonl file, or a task name in the tasks folder; none means
// every *.jsonl there, in name order.
std::vector<std::filesystem::path> task_files(const EvalOptions& o) {
  std::filesystem::path dir =
      o.tasks_dir.empty() ? default_tasks_dir() : std::filesystem::path(o.tasks_dir);
  std::vector<std::filesystem::path> files;
  if (o.tasks.empty()) {
    if (!std::filesystem::is_directory(dir))
      fail("{}: no tasks folder (give --tasks-dir)", dir.string());
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) fail("{}: no *.jsonl task files", dir.string());
    return files;
  }
  for (const std::string& t : o.tasks) {
    bool is_path = t.find('/') != std::string::npos || t.ends_with(".jsonl");
    files.push_back(is_path ? std::filesystem::path(t) : dir / (t + ".jsonl"));
  }
  return files;
}

// One progress line per task at most every second (and at its end); on a terminal the
// line is rewritten in place.
class Progress {
 public:
  explicit Progress(std::string name) : name_(std::move(name)), tty_(isatty(fileno(stderr))) {}

  void operator()(size_t done, size_t total) {
    auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    double seconds = std::chrono::duration<double>(now - start_).count();
    fmt::print(stderr, "{}eval: {} {}/{} ({:.1f} s){}", tty_ ? "\r" : "", name_, done, total,
               seconds, tty_ && done < total ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  std::string name_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};

// What scores the tasks: the model in-process (through the engine, or the reference
// scorer), or a server at --url. `engine` keeps the in-process engine alive.
struct ScorerChoice {
  LoadedModel reference_model;     // what the reference scorer reads
  std::unique_ptr<Engine> engine;  // what the engine scorer submits to
  std::unique_ptr<eval::Scorer> scorer;
  std::string model, device;
  std::optional<int> vocab;
  size_t batch_items = 16;        // items per scorer call: many in flight for a batched one
  bool loglikelihood = true;      // false: the server cannot score prompts (generation only)
  bool perplexity = true;         // false: nor tokenize a text for windows
};

ScorerChoice in_process_scorer(const EvalOptions& o) {
  const BatchFlags batch_flags{.rows = parse_auto_count(o.batch, "--batch"),
                               .tokens = parse_auto_count(o.max_batched_tokens, "--max-batched-tokens")};
  const std::optional<DType> kv_dtype = kv_cache_dtype_from_name(o.kv_cache_dtype);
  if (o.scorer != "engine" && o.scorer != "reference")
    fail("--scorer is engine or reference (got '{}')", o.scorer);
  ScorerChoice c;
  LoadedModel m = load_model_folder(o.model, o.device,
                                    LoadOptions{.online = online_quantization(o.quantization),
                                                .tp = {.size = o.tensor_parallel_size}},
                                    o.tokenizer);
  if (!m.tokenizer) fail("{}: eval needs tokenizer.json in the model folder", o.model);
  c.model = o.model;
  c.device = m.backend->name();
  c.vocab = m.model->config().vocab_size;
  if (o.scorer == "reference") {
    if (kv_dtype) fail("--kv-cache-dtype needs the engine scorer (the reference has no KV cache of its own dtype)");
    if (m.tp_ranks)
      fail(
          "--scorer reference does not run under --tensor-parallel-size yet (the engine scorer "
          "does)");
    auto tf = std::make_unique<eval::TeacherForcedScorer>(*m.model, *m.backend, m.tokenizer);
    c.scorer = std::move(tf);
    c.reference_model = std::move(m);
    return c;
  }
  BatchChoice chosen;
  c.engine = make_engine(m, EngineConfig{}, kv_dtype, batch_flags, &chosen);
  c.engine->start();
  c.scorer = std::make_unique<eval::EngineScorer>(*c.engine, m.tokenizer);
  c.batch_items = 256;
  fmt::print(stderr, "eval: engine {}, KV cache {}\n", chosen.reason, dtype_name(c.engine->kv_dtype()));
  return c;
}

ScorerChoice url_scorer(const EvalOptions& o) {
  if (o.quantization || o.kv_cache_dtype != "auto" || o.scorer != "engine")
    fail("--quantization, --kv-cache-dtype and --scorer are for a model folder, not --url");
  if (o.concurrency < 1) fail("--concurrency must be at least 1");
  ScorerChoice c;
  auto http = std::make_unique<eval::HttpScorer>(eval::HttpScorerConfig{
      .url = *o.url, .model = o.model, .api_key = o.api_key.value_or(""),
      .concurrency = o.concurrency});
  c.model = http->model();
  c.device = *o.url;
  c.loglikelihood = http->offers_prompt_logprobs();
  c.perplexity = c.loglikelihood && http->offers_tokenize();
  if (!c.loglikelihood)
    fmt::print(stderr, "eval: {} does not return prompt logprobs (echo + logprobs with max_tokens 0): "
               "only the generation tasks run\n", *o.url);
  else if (!c.perplexity)
    fmt::print(stderr, "eval: {} has no /tokenize: the perplexity tasks do not run\n", *o.url);
  c.scorer = std::move(http);
  c.batch_items = size_t(std::max(16, 4 * o.concurrency));
  return c;
}

}  // namespace

int run_eval(const EvalOptions& o) {
  try {
    if (o.limit && *o.limit == 0) fail("--limit must be at least 1");
    std::vector<eval::Task> tasks;
    for (const auto& file : task_files(o)) tasks.push_back(eval::read_task_file(file));
    ScorerChoice c = o.url ? url_scorer(o) : in_process_scorer(o);
    fmt::print(stderr, "eval: {} on {}, {} task(s)\n", c.model, c.device, tasks.size());
    std::vector<eval::TaskResult> results;
    for (const eval::Task& task : tasks) {
      const bool perplexity = std::holds_alternative<eval::PerplexityTask>(task.body);
      const bool choice = std::holds_alternative<eval::ChoiceTask>(task.body);
      if ((choice && !c.loglikelihood) || (perplexity && !c.perplexity)) {
        fmt::print(stderr, "eval: {} skipped (the server cannot score it)\n", task.name);
        continue;
      }
      eval::EvalOptions run;
      run.limit = o.limit;
      run.batch_items = c.batch_items;
      run.progress = Progress(task.name);
      results.push_back(eval::evaluate(task, *c.scorer, run));
    }
    if (c.engine) c.engine->stop(/*drain=*/false);
    fmt::print("{}", eval::format_table(results, c.vocab));
    if (o.json) {
      nlohmann::json j = eval::results_json(results, c.vocab);
      j["model"] = c.model;
      j["device"] = c.device;
      j["scorer"] = o.url ? "url" : o.scorer;
      std::ofstream out(*o.json);
      if (!(out << j.dump(1) << "\n")) fail("{}: cannot write", *o.json);
    }
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
