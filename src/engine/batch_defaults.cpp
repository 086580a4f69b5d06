#include "engine/batch_defaults.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace tandem {
namespace {

// Rows the KV cache holds at the typical context: the GPU's rule.
int gpu_rows(const BatchFacts& f, std::string& why) {
  const int context = std::max(1, std::min(f.max_model_len, kTypicalContext));
  const int64_t per_row = std::max<int64_t>(1, f.kv_bytes_per_token) * context;
  const int64_t fit = std::max<int64_t>(f.kv_bytes_available, 0) / per_row;
  const int rows = int(std::clamp<int64_t>(fit, 1, kMaxAutoRows));
  why = fit >= kMaxAutoRows
            ? fmt::format("the KV cache holds {} rows of {} tokens; capped at {}", fit, context,
                          kMaxAutoRows)
            : fmt::format("the KV cache holds {} rows of {} tokens", rows, context);
  return rows;
}

}  // namespace

BatchChoice choose_batch(const BatchFlags& flags, const BatchFacts& facts) {
  BatchChoice c;
  std::string rows_why = "--batch";
  if (flags.rows) {
    c.rows = *flags.rows;
  } else if (facts.gpu) {
    c.rows = gpu_rows(facts, rows_why);
  } else {
    c.rows = kCpuAutoRows;
    rows_why = "measured best on the CPU";
  }
  const char* tokens_why = "--max-batched-tokens";
  if (flags.tokens) {
    c.tokens = *flags.tokens;
  } else {
    // A decode step of every row must fit one step's budget.
    c.tokens = std::max(facts.gpu ? kCudaAutoTokens : kCpuAutoTokens, c.rows);
    tokens_why = facts.gpu ? "auto on a GPU" : "auto on the CPU";
  }
  c.reason = fmt::format("{} rows ({}), {} tokens per step ({})", c.rows, rows_why, c.tokens,
                         tokens_why);
  return c;
}

std::optional<int> parse_auto_count(const std::string& text, const std::string& flag) {
  if (text == "auto") return std::nullopt;
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1)
    fail("{} must be 'auto' or a positive integer (got '{}')", flag, text);
  return v;
}

}  // namespace tandem
