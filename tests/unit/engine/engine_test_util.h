// Helpers the engine tests share: an engine on the CPU backend over an oracle model, and
// a greedy request that ignores EOS (so it always runs to max_tokens).
#pragma once

#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "model/model.h"

namespace tandem::test {

inline std::filesystem::path oracle_model(const char* arch) {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / arch;
}

inline std::unique_ptr<Engine> cpu_engine(const char* arch, EngineConfig config,
                                          ExecutorConfig executor = {}) {
  auto backend = make_cpu_backend();
  auto model = load_model(oracle_model(arch), *backend);
  return std::make_unique<Engine>(make_executor(std::move(backend), std::move(model), executor),
                                  nullptr, config);
}

// Bytes one KV block id of the oracle model `arch` takes (all layers), blocks of 16.
inline int64_t kv_block_bytes(const char* arch, DType dtype) {
  auto backend = make_cpu_backend();
  return kv_bytes_per_block(load_model(oracle_model(arch), *backend)->kv_specs(), 16, dtype);
}

inline GenerationRequest greedy(std::vector<int32_t> prompt, int n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

}  // namespace tandem::test
