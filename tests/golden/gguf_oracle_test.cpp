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

// Greedy runs on the files whose reference paths keep wide top-1 − top-2 gaps (F32 at f32
// accuracy; Q4_K_M's prompts were chosen for gaps >= 0.15, room for 8-bit activations).
class GgufOracleGreedy : public GgufOracle {};

TEST_P(GgufOracleGreedy, GreedyMatchesThroughTheEngine) {
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

std::string case_name(const ::testing::TestParamInfo<GgufCase>& info) {
  return info.param.file.substr(6, info.param.file.size() - 11);  // "llama-F32.gguf" -> "F32"
}

INSTANTIATE_TEST_SUITE_P(Files, GgufOracle,
                         ::testing::Values(GgufCase{"llama-F32.gguf", 1e-4},
                                           GgufCase{"llama-Q8_0.gguf", 5e-2},
                                           GgufCase{"llama-Q4_K_M.gguf", 5e-2}),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Files, GgufOracleGreedy,
                         ::testing::Values(GgufCase{"llama-F32.gguf", 1e-4},
                                           GgufCase{"llama-Q4_K_M.gguf", 5e-2}),
                         case_name);

}  // namespace
}  // namespace tandem::test
