// The block-type arithmetic against llama.cpp's own files (tests/data/oracle/gguf/: Q8_0, Q4_0,
// Q4_K_M, Q5_K_M quantized by llama-quantize, with float64 goldens computed from ggml's
// dequantized weights). The one-layer llama runs through the CPU backend's linear and
// embedding with the weights in their blocks (gguf_tiny_llama.h):
//   - dequantize_row is ggml's: weights decoded to f32 on the host land within 1e-4 (f32
//     round-off; ~1e-6 measured), which a single wrong value in a tensor would miss;
//   - the exact kernels compute the f32 product over those values: bit for bit the f32 GEMM
//     over the host-decoded weights, on every instruction set the machine runs;
//   - the 8-bit-activation kernels stay within 5e-2 (llama.cpp's own: 1.6–2.6e-2).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "gguf_tiny_llama.h"
#include "loader/safetensors.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace gguf_arithmetic_test {

struct GoldenPrompt {
  std::vector<int32_t> tokens;  // prompt + greedy continuation
  std::vector<float> logits;    // [tokens, vocab]
};

std::filesystem::path gguf_dir() {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "gguf";
}

std::vector<GoldenPrompt> goldens(const std::string& name) {
  auto file = SafetensorsFile::open(gguf_dir() / (name + ".golden.safetensors"));
  std::vector<GoldenPrompt> out;
  for (int i = 0; file->has("prompt." + std::to_string(i)); i++) {
    const std::string s = std::to_string(i);
    GoldenPrompt g;
    for (const char* part : {"prompt.", "greedy."}) {
      Tensor t = file->tensor(part + s);
      g.tokens.insert(g.tokens.end(), t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel());
    }
    Tensor l = file->tensor("logits." + s);
    g.logits.assign(l.ptr<float>(), l.ptr<float>() + l.numel());
    out.push_back(std::move(g));
  }
  return out;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2e", v);
  return buf;
}

std::vector<CpuIsa> isas() {
  std::vector<CpuIsa> v{CpuIsa::Avx2};
  if (cpu_max_isa() >= CpuIsa::Avx512) v.push_back(CpuIsa::Avx512);
  return v;
}

class GgufArithmetic : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufArithmetic, ExactTwinWithinF32RoundOffOfTheGolden) {
  const GgufTestFile file(gguf_dir() / (GetParam() + ".gguf"));
  const std::vector<GoldenPrompt> prompts = goldens(GetParam());
  ASSERT_EQ(prompts.size(), 4u);
  for (CpuIsa isa : isas()) {
    SCOPED_TRACE(std::string(cpu_isa_name(isa)));
    CpuBackend be(nullptr, isa);
    be.set_block_arithmetic(cpu::BlockArithmetic::Exact);
    for (size_t p = 0; p < prompts.size(); p++) {
      const GoldenPrompt& g = prompts[p];
      const std::vector<float> decoded = tiny_llama_logits(be, file, g.tokens, true);
      const std::vector<float> blocks = tiny_llama_logits(be, file, g.tokens, false);
      ASSERT_EQ(blocks.size(), g.logits.size());
      const double err = relative_error(decoded.data(), g.logits.data(), g.logits.size());
      EXPECT_LT(err, 1e-4) << "prompt " << p;
      RecordProperty(
          GetParam() + "_" + std::string(cpu_isa_name(isa)) + "_prompt" + std::to_string(p),
          sci(err));
      EXPECT_EQ(std::memcmp(blocks.data(), decoded.data(), blocks.size() * 4), 0)
          << "prompt " << p
          << ": the exact kernels differ from the f32 GEMM over the decoded weights";
    }
  }
}

TEST_P(GgufArithmetic, Int8ActivationsWithinFivePercentOfTheGolden) {
  const GgufTestFile file(gguf_dir() / (GetParam() + ".gguf"));
  const std::vector<GoldenPrompt> prompts = goldens(GetParam());
  for (CpuIsa isa : isas()) {
    SCOPED_TRACE(std::string(cpu_isa_name(isa)));
    CpuBackend be(nullptr, isa);
    be.set_block_arithmetic(cpu::BlockArithmetic::Int8);
    for (size_t p = 0; p < prompts.size(); p++) {
      const std::vector<float> logits = tiny_llama_logits(be, file, prompts[p].tokens, false);
      const double err = relative_error(logits.data(), prompts[p].logits.data(), logits.size());
      EXPECT_LT(err, 5e-2) << "prompt " << p;
      EXPECT_GT(err, 1e-4) << "prompt " << p
                           << ": 8-bit activations should cost more than round-off";
      RecordProperty(
          GetParam() + "_" + std::string(cpu_isa_name(isa)) + "_prompt" + std::to_string(p),
          sci(err));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OracleFiles, GgufArithmetic,
                         ::testing::Values("llama-Q8_0", "llama-Q4_0", "llama-Q4_K_M",
                                           "llama-Q5_K_M"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

}  // namespace gguf_arithmetic_test
}  // namespace tandem::test
