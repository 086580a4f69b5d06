// The oracle fixtures (tests/data/oracle/<arch>/): a tiny HF model folder plus
// golden.safetensors with, per prompt i, prompt.i, greedy.i, logits.i, batch_greedy.i.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace tandem::test {

struct OraclePrompt {
  std::vector<int32_t> prompt;        // [L]
  std::vector<int32_t> greedy;        // [24] run alone
  std::vector<int32_t> batch_greedy;  // [24] all prompts in one batch
  Tensor logits;                      // host f32 [L + 24, vocab], teacher-forced
};

std::filesystem::path oracle_dir(const std::string& arch);
std::vector<OraclePrompt> load_oracle(const std::string& arch);
// The ids of a host I32 tensor (a golden file's prompt or greedy tokens).
std::vector<int32_t> ids_of(const Tensor& t);
// ‖a − b‖ / ‖b‖ over all elements.
double relative_error(const float* a, const float* b, size_t n);

// The message of the tandem::Error `fn` throws ("" when it throws none).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tandem::test
