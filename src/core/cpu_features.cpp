#include "core/cpu_features.h"

#include <cpuid.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace tandem {

namespace {

// XCR0 (the register state the OS saves on a context switch); needs OSXSAVE.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  const uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  const bool os_saves_ymm = (xcr0 & 0x6) == 0x6;
  f.os_saves_zmm = (xcr0 & 0xe6) == 0xe6;  // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = avx && os_saves_ymm && ((b >> 5) & 1);
  f.avx512f = (b >> 16) & 1;
  f.avx512bw = (b >> 30) & 1;
  f.avx512vl = (b >> 31) & 1;
  f.avx512_vnni = (c >> 11) & 1;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a >> 5) & 1;
  return f;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

CpuIsa cpu_max_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.os_saves_zmm) return CpuIsa::Avx512;
  return CpuIsa::Avx2;
}

namespace {

// The cap set by set_cpu_isa_cap, as the enum's value; -1: none.
std::atomic<int> g_isa_cap{-1};

}  // namespace

void set_cpu_isa_cap(CpuIsa cap) {
  g_isa_cap.store(int(cap), std::memory_order_relaxed);
}

CpuIsa cpu_isa() {
  const CpuIsa max = cpu_max_isa();
  const int cap = g_isa_cap.load(std::memory_order_relaxed);
  return cap >= 0 && CpuIsa(cap) < max ? CpuIsa(cap) : max;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

std::optional<CpuIsa> cpu_isa_from_name(std::string_view name) {
  if (name == "avx2") return CpuIsa::Avx2;
  if (name == "avx512") return CpuIsa::Avx512;
  return std::nullopt;
}

int num_physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  // A core is its (package, core id) pair; SMT siblings share it.
  std::set<std::pair<std::string, std::string>> cores;
  int logical = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &set)) continue;
    logical++;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const std::string core = read_line(dir + "core_id");
    if (core.empty()) continue;
    cores.insert({read_line(dir + "physical_package_id"), core});
  }
  const int n = cores.empty() ? logical : int(cores.size());
  return n > 0 ? n : 1;
}

}  // namespace tandem
