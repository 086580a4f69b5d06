// The GGUF oracle (tests/data/oracle/gguf, from ../shared/oracle/gguf): llama.cpp's own files
// of a random llama with Llama 3 RoPE scaling (the rope_freqs tensor) and permuted Q/K rows,
// and float64 logits computed from their dequantized weights. Through the normal load path
// (load_model on the .gguf), teacher-forced logits match within 1e-4 on the F32 file and
// within 5e-2 on the quantized ones (the bar's tolerance: 8-bit activations are allowed),
// and greedy decoding through the engine reproduces the reference's.
//
// The quantized files run only where the backend keeps their block types (weight_dtype);
// until the kernels land they SKIP, loudly, naming the type — never pass silently — and with
// TANDEM_REQUIRE_GGUF_KERNELS=1 they FAIL instead (gguf_golden.h).
#include <gtest/gtest.h>

#include <cstring>

#include "engine/engine.h"
#include "engine/teacher_forcing.h"
#include "loader/gguf_model.h"
#include "loader/safetensors.h"
#include "gguf_golden.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace {

struct GgufCase {
  std::string file;    // under tests/data/oracle/gguf/
  double tolerance;    // relative error of the logits
  bool greedy;         // the reference's greedy path is checked (gaps are wide enough)
};

class GgufOracle : public ::testing::TestWithParam<GgufCase> {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend();
    if (std::string why = gate_not_run(GetParam().file, *backend_); !why.empty()) {
      if (gguf_kernels_required()) FAIL() << why;
      GTEST_SKIP() << why;
    }
  }
  std::unique_ptr<Backend> backend_;
};

TEST_P(GgufOracle, TeacherForcedLogitsMatch) {
  auto model = load_model(gguf_dir() / GetParam().file, *backend_);
  EXPECT_EQ(model->config().model_type, "llama");
  for (const GgufGolden& p : load_gguf_golden(GetParam().file)) {
    std::vector<int32_t> ids = p.prompt;
    ids.insert(ids.end(), p.greedy.begin(), p.greedy.end());
    Tensor ours = teacher_forced_logits(*model, *backend_, ids);
    ASSERT_EQ(ours.numel(), p.logits.numel());
    double err = relative_error(ours.ptr<float>(), p.logits.ptr<float>(), size_t(ours.numel()));
    EXPECT_LE(err, GetParam().tolerance) << "prompt of " << p.prompt.size() << " tokens";
  }
}

TEST_P(GgufOracle, GreedyMatchesThroughTheEngine) {
  if (!GetParam().greedy) GTEST_SKIP() << "greedy gaps too narrow for 8-bit activations on this file";
  auto model = load_model(gguf_dir() / GetParam().file, *backend_);
  Engine engine(make_executor(std::move(backend_), std::move(model)), nullptr, EngineConfig{});
  for (const GgufGolden& p : load_gguf_golden(GetParam().file)) {
    GenerationRequest req;
    req.prompt = p.prompt;
    req.max_tokens = int(p.greedy.size());
    req.sampling.temperature = 0;
    req.ignore_eos = true;
    auto stream = engine.submit(req);
    engine.run_until_idle();
    std::vector<int32_t> got;
    while (auto c = stream->pop(std::chrono::milliseconds(0)))
      for (auto& t : c->tokens) got.push_back(t.token);
    EXPECT_EQ(got, p.greedy) << "prompt of " << p.prompt.size() << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(Files, GgufOracle,
                         ::testing::Values(GgufCase{"llama-F32.gguf", 1e-4, true},
                                           GgufCase{"llama-Q8_0.gguf", 5e-2, false},
                                           GgufCase{"llama-Q4_K_M.gguf", 5e-2, true}),
                         [](const auto& info) {
                           std::string n = info.param.file.substr(6, info.param.file.size() - 11);
                           return n;
                         });

}  // namespace
}  // namespace tandem::test
