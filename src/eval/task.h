// An evaluation task as its JSONL file states it (the schema: eval/tasks/README.md): a
// header naming the task, its kind and its chance rate, then the items. Tasks are data;
// the kind alone decides how items are scored (evaluate.h).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "eval/scorer.h"

namespace tandem::eval {

// Log-likelihood multiple choice: one (context, continuation) pair per choice; the
// prediction is the pair with the highest log-likelihood. A file item either shares one
// context among all choices ("choices": the continuations) or gives each choice its own
// context before one shared continuation ("contexts" + "continuation", the partial
// scoring lm-evaluation-harness uses for Winogrande); both become these pairs.
struct ChoiceItem {
  std::vector<LoglikelihoodRequest> options;  // [num_choices], at least 2
  size_t gold = 0;                            // index into options
  int line = 0;                               // 1-based line in the task file
};

// Greedy generation, scored by exact match after normalize_for_match (metrics.h).
struct GenerateItem {
  std::string prompt;
  std::string expected;
  std::vector<std::string> stop;  // the item's own, else the task's
  int line = 0;
};

struct ChoiceTask {
  std::vector<ChoiceItem> items;
};

struct GenerateTask {
  int max_tokens = 0;
  std::vector<std::string> stop;  // the items' stop strings unless they give their own
  std::vector<GenerateItem> items;
};

// Perplexity over one text file, by the protocol of tools/tiny-model/README.md.
struct PerplexityTask {
  std::filesystem::path text_file;  // resolved against the task file's folder
  std::optional<int> window;        // tokens per window; default: the model's context
};

enum class TaskKind { Choice, Generate, Perplexity };

struct Task {
  std::string name;
  std::filesystem::path file;
  std::string description;
  std::string held_out;  // which items the embedded model was not trained on
  // What a random guess scores: an accuracy for choice and generate tasks; none for
  // perplexity, where a uniform guess scores the vocabulary size (known at run time).
  std::optional<double> chance;
  std::variant<ChoiceTask, GenerateTask, PerplexityTask> body;

  TaskKind kind() const { return TaskKind(body.index()); }
};

const char* kind_name(TaskKind kind);

}  // namespace tandem::eval
