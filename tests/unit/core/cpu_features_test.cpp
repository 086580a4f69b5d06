// cpu_features: the ISA ladder is consistent with the feature bits, names round-trip,
// and the physical core count is sane. (What the CPU has cannot be asserted; what
// follows from it can.)
#include <gtest/gtest.h>

#include <thread>

#include "core/cpu_features.h"

namespace tandem {
namespace cpu_features_test {

TEST(CpuFeatures, IsaFollowsTheFeatureBits) {
  const CpuFeatures& f = cpu_features();
  // The build targets x86-64-v3: a machine running this test has AVX2, FMA and F16C.
  EXPECT_TRUE(f.avx2 && f.fma && f.f16c);
  const bool has512 = f.avx512f && f.avx512bw && f.avx512vl && f.os_saves_zmm;
  EXPECT_EQ(cpu_max_isa() == CpuIsa::Avx512, has512);
  EXPECT_LE(cpu_isa(), cpu_max_isa());
}

// The cap TANDEM_CPU_ISA sets (through cli/env_switches.h): never above what the CPU has.
TEST(CpuFeatures, TheCapLowersTheIsaOnly) {
  set_cpu_isa_cap(CpuIsa::Avx2);
  EXPECT_EQ(cpu_isa(), CpuIsa::Avx2);
  set_cpu_isa_cap(CpuIsa::Avx512);
  EXPECT_EQ(cpu_isa(), cpu_max_isa()) << "a cap above the CPU is ignored";
}

TEST(CpuFeatures, IsaNamesRoundTrip) {
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512})
    EXPECT_EQ(cpu_isa_from_name(cpu_isa_name(isa)), isa);
  EXPECT_FALSE(cpu_isa_from_name("sse2").has_value());
}

TEST(CpuFeatures, PhysicalCoresAreWithinTheLogicalOnes) {
  const int n = num_physical_cores();
  EXPECT_GE(n, 1);
  const unsigned logical = std::thread::hardware_concurrency();
  if (logical > 0) {
    EXPECT_LE(unsigned(n), logical);
  }
}

}  // namespace cpu_features_test
}  // namespace tandem
