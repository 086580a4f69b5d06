#include "cli/env_switches.h"

#include <cstdlib>
#include <optional>
#include <string_view>

namespace tandem::cli {
namespace {

// nullopt when unset; else whether it is anything but "0".
std::optional<bool> read_switch(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string_view(v) != "0";
}

EnvSwitches read_env() {
  EnvSwitches s;
  s.graphs = read_switch("TANDEM_CUDA_GRAPHS").value_or(true);
  if (std::optional<bool> overlap = read_switch("TANDEM_OVERLAP"))
    s.overlap = *overlap ? Overlap::On : Overlap::Off;
  s.cuda.gemv = read_switch("TANDEM_CUDA_GEMV").value_or(true);
  s.cuda.pdl = read_switch("TANDEM_CUDA_PDL").value_or(true);
  if (const char* a = std::getenv("TANDEM_CPU_BLOCK_ARITHMETIC")) s.cpu_block_arithmetic = a;
  return s;
}

}  // namespace

const EnvSwitches& env_switches() {
  static const EnvSwitches switches = read_env();
  return switches;
}

}  // namespace tandem::cli
