#include "cli/env_switches.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "backend/gguf_tiles.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace tandem::cli {
namespace {

// nullopt when unset; else whether it is anything but "0".
std::optional<bool> read_switch(const EnvLookup& lookup, const char* name) {
  const char* v = lookup(name);
  if (!v) return std::nullopt;
  return std::string_view(v) != "0";
}

// TANDEM_ATTN_PREFILL: whether the sm90 prefill kernel may run.
bool read_prefill(const EnvLookup& lookup) {
  const char* v = lookup("TANDEM_ATTN_PREFILL");
  if (!v) return true;
  const std::string_view s(v);
  if (s != "mma" && s != "sm90") fail("TANDEM_ATTN_PREFILL='{}': expected mma or sm90", s);
  return s == "sm90";
}

int read_threads(const EnvLookup& lookup) {
  const char* v = lookup("TANDEM_THREADS");
  if (!v) return 0;
  const std::string_view s(v);
  int n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 1)
    fail("TANDEM_THREADS='{}': expected a whole number of threads, at least 1", s);
  return n;
}

std::optional<CpuIsa> read_isa(const EnvLookup& lookup) {
  const char* v = lookup("TANDEM_CPU_ISA");
  if (!v) return std::nullopt;
  const std::optional<CpuIsa> isa = cpu_isa_from_name(v);
  if (!isa) fail("TANDEM_CPU_ISA='{}': expected avx2 or avx512", v);
  return isa;
}

}  // namespace

EnvSwitches parse_env_switches(const EnvLookup& lookup) {
  EnvSwitches s;
  s.graphs = read_switch(lookup, "TANDEM_CUDA_GRAPHS").value_or(true);
  s.verify_graphs = read_switch(lookup, "TANDEM_VERIFY_GRAPHS").value_or(true);
  if (std::optional<bool> overlap = read_switch(lookup, "TANDEM_OVERLAP"))
    s.overlap = *overlap ? Overlap::On : Overlap::Off;
  s.cuda.gemv = read_switch(lookup, "TANDEM_CUDA_GEMV").value_or(true);
  s.cuda.pdl = read_switch(lookup, "TANDEM_CUDA_PDL").value_or(true);
  s.cuda.fp8_fast_accum = read_switch(lookup, "TANDEM_FP8_FAST_ACCUM").value_or(true);
  s.cuda.fp8_moe_tc = read_switch(lookup, "TANDEM_FP8_MOE_TC").value_or(true);
  s.cuda.sm90_prefill = read_prefill(lookup);
  s.vision_timing = read_switch(lookup, "TANDEM_VISION_TIMING").value_or(false);
  s.tp_executor = read_switch(lookup, "TANDEM_TP_EXECUTOR").value_or(false);
  s.threads = read_threads(lookup);
  s.cpu_isa = read_isa(lookup);
  s.gguf_tiles = read_switch(lookup, "TANDEM_GGUF_TILES").value_or(true);
  s.gguf_moe_tiles = read_switch(lookup, "TANDEM_GGUF_MOE_TILES").value_or(true);
  if (const char* a = lookup("TANDEM_CPU_BLOCK_ARITHMETIC")) s.cpu_block_arithmetic = a;
  return s;
}

const EnvSwitches& env_switches() {
  static const EnvSwitches switches =
      parse_env_switches([](const char* name) { return std::getenv(name); });
  return switches;
}

bool apply_process_switches(int threads_flag) {
  try {
    const EnvSwitches& s = env_switches();
    if (s.cpu_isa) set_cpu_isa_cap(*s.cpu_isa);
    set_gguf_tiles(s.gguf_tiles);
    set_gguf_moe_tiles(s.gguf_moe_tiles);
    const int threads = threads_flag > 0 ? threads_flag : s.threads;
    if (threads > 0) ThreadPool::set_global_threads(threads);
    return true;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return false;
  }
}

}  // namespace tandem::cli
