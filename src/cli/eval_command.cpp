// `tandem eval`: evaluation tasks (eval/tasks/*.jsonl, schema in eval/tasks/README.md) on a
// model in-process: progress on stderr, the table on stdout, the raw numbers with --json.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "eval/evaluate.h"
#include "eval/report.h"
#include "eval/task_reader.h"
#include "eval/teacher_forced_scorer.h"

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

}  // namespace

int run_eval(const EvalOptions& o) {
  try {
    if (o.limit && *o.limit == 0) fail("--limit must be at least 1");
    std::vector<eval::Task> tasks;
    for (const auto& file : task_files(o)) tasks.push_back(eval::read_task_file(file));
    LoadedModel m = load_model_folder(o.model, o.device,
                                      LoadOptions{.online = online_quantization(o.quantization)});
    if (!m.tokenizer) fail("{}: eval needs tokenizer.json in the model folder", o.model);
    eval::TeacherForcedScorer scorer(*m.model, *m.backend, m.tokenizer);
    fmt::print(stderr, "eval: {} on {}, {} task(s)\n", o.model, m.backend->name(), tasks.size());
    std::vector<eval::TaskResult> results;
    for (const eval::Task& task : tasks) {
      eval::EvalOptions run;
      run.limit = o.limit;
      run.progress = Progress(task.name);
      results.push_back(eval::evaluate(task, scorer, run));
    }
    std::optional<int> vocab = m.model->config().vocab_size;
    fmt::print("{}", eval::format_table(results, vocab));
    if (o.json) {
      nlohmann::json j = eval::results_json(results, vocab);
      j["model"] = o.model;
      j["device"] = m.backend->name();
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
