// What the host CPU offers the kernels, read once with cpuid (and xgetbv: the OS must
// save the wide registers too). The binary is built for x86-64-v3 (AVX2, FMA, F16C), so
// AVX2 is the floor; wider kernels live in their own translation units, compiled with
// their own target flags, and run only when cpu_isa() says the machine has them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem {

// The instruction sets the CPU kernels are written for, narrowest first.
enum class CpuIsa : uint8_t {
  Avx2,    // AVX2 + FMA + F16C (x86-64-v3, the build's baseline)
  Avx512,  // AVX-512 F, BW, VL (and the OS saves zmm state)
};

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_bf16 = false;
  bool avx512_vnni = false;  // vpdpbusd (the ggml block types' integer kernels)
  bool os_saves_zmm = false;
};

// The features of this CPU (cpuid, once).
const CpuFeatures& cpu_features();

// The widest CpuIsa this CPU runs, capped by set_cpu_isa_cap (a cap above what the CPU
// has is ignored).
CpuIsa cpu_isa();
// The widest CpuIsa this CPU runs, ignoring the cap.
CpuIsa cpu_max_isa();
// Caps cpu_isa() for the process (TANDEM_CPU_ISA, read by cli/env_switches.h: a way to
// compare the kernels on one machine). Call at start-up, before any CPU backend exists: a
// backend keeps the ISA it was made with.
void set_cpu_isa_cap(CpuIsa cap);

std::string_view cpu_isa_name(CpuIsa isa);  // "avx2", "avx512"
std::optional<CpuIsa> cpu_isa_from_name(std::string_view name);

// Physical cores this process may run on: logical CPUs in its affinity mask, counting
// SMT siblings once. At least 1.
int num_physical_cores();

}  // namespace tandem
