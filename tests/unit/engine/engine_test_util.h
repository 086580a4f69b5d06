// Helpers the engine tests share: an engine on the CPU backend over an oracle model,
// prompts, draining a stream, and a greedy request that ignores EOS (so it always runs
// to max_tokens).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "engine/speculative_config.h"
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

// ‖a − b‖ / ‖b‖ over n values.
inline double relative_error(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// A deterministic prompt of n tokens; `salt` tells prompts of one test apart.
inline std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; i++) p.push_back((i * 37 + salt * 11) % 500 + 3);
  return p;
}

// The token ids a stream has delivered so far (and its finish reason, when asked).
inline std::vector<int32_t> drain(RequestStream& s, std::optional<FinishReason>* finish = nullptr) {
  std::vector<int32_t> ids;
  while (auto c = s.pop(std::chrono::milliseconds(0))) {
    for (auto& t : c->tokens) ids.push_back(t.token);
    if (c->finish && finish) *finish = c->finish;
  }
  return ids;
}

// Speculation by n-gram lookup: K proposals from n-grams of min_n..max_n tokens.
inline SpeculativeConfig ngram_config(int k, int min_n, int max_n, bool adaptive = true) {
  SpeculativeConfig c;
  c.method = SpecMethod::Ngram;
  c.num_speculative_tokens = k;
  c.prompt_lookup_min = min_n;
  c.prompt_lookup_max = max_n;
  c.adaptive = adaptive;
  return c;
}

inline GenerationRequest greedy(std::vector<int32_t> prompt, int n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

// Four requests at once under `tight` (a KV budget too small for all of them): the newest
// are preempted and recomputed, and every output equals that request's solo run.
inline void expect_preemption_is_invisible(const char* arch, const EngineConfig& tight) {
  std::vector<std::vector<int32_t>> solo;
  auto ref = cpu_engine(arch, {});
  for (int i = 0; i < 4; i++) {
    auto s = ref->submit(greedy(prompt_of(20 + i, i), 30));
    ref->run_until_idle();
    solo.push_back(drain(*s));
  }
  auto engine = cpu_engine(arch, tight);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; i++) streams.push_back(engine->submit(greedy(prompt_of(20 + i, i), 30)));
  engine->run_until_idle();
  EXPECT_GT(engine->stats().num_preemptions, 0);
  for (int i = 0; i < 4; i++)
    EXPECT_EQ(drain(*streams[size_t(i)]), solo[size_t(i)]) << arch << " request " << i;
  EXPECT_EQ(engine->kv_blocks().num_used(), 0);
}

}  // namespace tandem::test
