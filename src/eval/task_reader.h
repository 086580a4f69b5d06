// Reads and validates a task file (eval/tasks/README.md). Every problem is a tandem::Error
// naming file:line and the field, so a broken task fails before any model is loaded.
#pragma once

#include <filesystem>
#include <string_view>

#include "eval/task.h"

namespace tandem::eval {

Task read_task_file(const std::filesystem::path& path);

// The same from text; `origin` names the file in errors and is the folder that relative
// paths (a perplexity task's "text") are resolved against.
Task parse_task(std::string_view text, const std::filesystem::path& origin);

}  // namespace tandem::eval
