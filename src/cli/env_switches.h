// The environment switches that turn pieces of the fast path off, to compare against them
// (docs/cuda.md, "Switches for comparisons"). This is the only place tandem reads them; they
// travel on as config (EngineConfig, ExecutorConfig, CudaOptions). "0" turns a switch off:
//   TANDEM_CUDA_GRAPHS  decode steps as recorded CUDA graphs
//   TANDEM_OVERLAP      the engine issues step n+1 before reading step n's tokens ("1"
//                       forces it on; unset: where the device runs asynchronously)
//   TANDEM_CUDA_GEMV    1–2 row linears stream their weights (off: cuBLASLt)
//   TANDEM_CUDA_PDL     programmatic dependent launch between kernels
//   TANDEM_CPU_BLOCK_ARITHMETIC  "exact" or "int8": how the CPU backend multiplies GGUF block
//                       weights (docs/gguf-kernels.md); unset: its default
#pragma once

#include <string>

#include "backend/backend.h"
#include "engine/engine.h"

namespace tandem::cli {

struct EnvSwitches {
  bool graphs = true;
  Overlap overlap = Overlap::Auto;
  CudaOptions cuda;
  std::string cpu_block_arithmetic;  // "" (the backend's default), "exact" or "int8"
};

// Read from the environment on the first call.
const EnvSwitches& env_switches();

}  // namespace tandem::cli
