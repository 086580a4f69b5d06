// `--batch auto` and `--max-batched-tokens auto` (the defaults): the step shape chosen for
// the device, so `tandem serve --model DIR` batches without tuning flags.
//
// The rule (printed by --help and on the ready card):
//   - CUDA: as many rows as the KV cache holds at a typical context of
//     kTypicalContext tokens (or the model's context when shorter), from 1 to kMaxAutoRows;
//     kCudaAutoTokens tokens per step.
//   - CPU: kCpuAutoRows rows and kCpuAutoTokens tokens per step, the counts that measured
//     best on the embedded model and the llama-100m shape (bench/RESULTS.md,
//     "--batch auto on the CPU"). Rows past what the cores can compute in one weight
//     stream cost latency, not throughput; a smaller step budget keeps a long prompt's
//     chunk from stalling the rows that decode beside it.
// An explicit number always wins; `--batch 1` is the serial path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tandem {

// 1,024 as vLLM on GPUs of 70 GB and more: the FP8 8B shape gains up to there (the figures:
// bench/RESULTS.md), and a step never takes more rows than requests are in flight.
inline constexpr int kMaxAutoRows = 1024;
inline constexpr int kTypicalContext = 2048;
inline constexpr int kCudaAutoTokens = 8192;
inline constexpr int kCpuAutoRows = 16;
inline constexpr int kCpuAutoTokens = 512;

// What the flags said: nullopt is `auto`.
struct BatchFlags {
  std::optional<int> rows;
  std::optional<int> tokens;
};

// What the chooser may know of the device and the model.
struct BatchFacts {
  bool gpu = false;
  int64_t kv_bytes_available = 0;  // what the KV cache may take on the device
  int64_t kv_bytes_per_token = 0;  // one token of every layer, in the cache dtype
  int max_model_len = 1;
};

struct BatchChoice {
  int rows = 1;
  int tokens = 2048;
  std::string reason;  // one line for the ready card and /stats
};

BatchChoice choose_batch(const BatchFlags& flags, const BatchFacts& facts);

// "auto" → nullopt, a positive integer → it; throws tandem::Error naming `flag` otherwise.
std::optional<int> parse_auto_count(const std::string& text, const std::string& flag);

}  // namespace tandem
