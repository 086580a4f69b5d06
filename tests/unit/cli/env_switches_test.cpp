// The environment switches: every variable tandem reads is parsed in one place
// (cli/env_switches.h), with its default when unset, "0" turning a switch off, and a clear
// error naming the variable for a malformed value.
#include "cli/env_switches.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"

namespace tandem::cli {
namespace env_switches_test {

// A fake environment.
EnvSwitches parse(const std::map<std::string, std::string>& env) {
  return parse_env_switches([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The error a malformed environment gives (empty when it parses).
std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    parse(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EnvSwitches, UnsetMeansTheFastPath) {
  const EnvSwitches s = parse({});
  EXPECT_TRUE(s.graphs);
  EXPECT_EQ(s.overlap, Overlap::Auto);
  EXPECT_TRUE(s.cuda.gemv);
  EXPECT_TRUE(s.cuda.pdl);
  EXPECT_TRUE(s.cuda.sm90_prefill);
  EXPECT_TRUE(s.cuda.fp8_fast_accum);
  EXPECT_TRUE(s.cuda.fp8_moe_tc);
  EXPECT_FALSE(s.vision_timing) << "it waits for the device: asked for only";
  EXPECT_FALSE(s.tp_executor) << "-tp 1 is the single worker unless asked";
  EXPECT_EQ(s.threads, 0);
  EXPECT_FALSE(s.cpu_isa.has_value());
}

TEST(EnvSwitches, ZeroTurnsEachSwitchOff) {
  const EnvSwitches s = parse({{"TANDEM_CUDA_GRAPHS", "0"},
                               {"TANDEM_OVERLAP", "0"},
                               {"TANDEM_CUDA_GEMV", "0"},
                               {"TANDEM_CUDA_PDL", "0"},
                               {"TANDEM_FP8_FAST_ACCUM", "0"},
                               {"TANDEM_FP8_MOE_TC", "0"}});
  EXPECT_FALSE(s.graphs);
  EXPECT_EQ(s.overlap, Overlap::Off);
  EXPECT_FALSE(s.cuda.gemv);
  EXPECT_FALSE(s.cuda.pdl);
  EXPECT_FALSE(s.cuda.fp8_fast_accum);
  EXPECT_FALSE(s.cuda.fp8_moe_tc);
  EXPECT_TRUE(s.cuda.sm90_prefill) << "untouched by the others";
}

TEST(EnvSwitches, AnythingButZeroTurnsASwitchOn) {
  const EnvSwitches s = parse({{"TANDEM_OVERLAP", "1"},
                               {"TANDEM_CUDA_GEMV", "yes"},
                               {"TANDEM_FP8_MOE_TC", "1"},
                               {"TANDEM_VISION_TIMING", "1"},
                               {"TANDEM_TP_EXECUTOR", "1"}});
  EXPECT_EQ(s.overlap, Overlap::On);
  EXPECT_TRUE(s.cuda.gemv);
  EXPECT_TRUE(s.cuda.fp8_moe_tc);
  EXPECT_TRUE(s.vision_timing);
  EXPECT_TRUE(s.tp_executor);
  EXPECT_FALSE(parse({{"TANDEM_FP8_MOE_TC", "0"}}).cuda.fp8_moe_tc);
}

TEST(EnvSwitches, PrefillKernelByName) {
  EXPECT_FALSE(parse({{"TANDEM_ATTN_PREFILL", "mma"}}).cuda.sm90_prefill);
  EXPECT_TRUE(parse({{"TANDEM_ATTN_PREFILL", "sm90"}}).cuda.sm90_prefill);
  EXPECT_EQ(error_of({{"TANDEM_ATTN_PREFILL", "fa3"}}),
            "TANDEM_ATTN_PREFILL='fa3': expected mma or sm90");
}

TEST(EnvSwitches, ThreadsAreAWholeNumber) {
  EXPECT_EQ(parse({{"TANDEM_THREADS", "6"}}).threads, 6);
  for (const char* bad : {"0", "-2", "four", "4x", ""})
    EXPECT_EQ(
        error_of({{"TANDEM_THREADS", bad}}),
        std::string("TANDEM_THREADS='") + bad + "': expected a whole number of threads, at least 1")
        << bad;
}

TEST(EnvSwitches, CpuIsaByName) {
  EXPECT_EQ(parse({{"TANDEM_CPU_ISA", "avx2"}}).cpu_isa, CpuIsa::Avx2);
  EXPECT_EQ(parse({{"TANDEM_CPU_ISA", "avx512"}}).cpu_isa, CpuIsa::Avx512);
  EXPECT_EQ(error_of({{"TANDEM_CPU_ISA", "sse4"}}),
            "TANDEM_CPU_ISA='sse4': expected avx2 or avx512");
}

TEST(EnvSwitches, GgufTilesOnUnlessZero) {
  EXPECT_TRUE(parse({}).gguf_tiles);
  EXPECT_FALSE(parse({{"TANDEM_GGUF_TILES", "0"}}).gguf_tiles);
  EXPECT_TRUE(parse({{"TANDEM_GGUF_TILES", "1"}}).gguf_tiles);
}

TEST(EnvSwitches, GgufMoeTilesOnUnlessZero) {
  EXPECT_TRUE(parse({}).gguf_moe_tiles) << "measured faster on an H100 (issue 42)";
  EXPECT_FALSE(parse({{"TANDEM_GGUF_MOE_TILES", "0"}}).gguf_moe_tiles);
  EXPECT_TRUE(parse({{"TANDEM_GGUF_MOE_TILES", "1"}}).gguf_moe_tiles);
}

}  // namespace env_switches_test
}  // namespace tandem::cli
