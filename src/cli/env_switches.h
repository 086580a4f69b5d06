// The environment variables tandem reads, all of them, here and nowhere else (docs/cuda.md,
// "Switches"; docs/cpu.md). They travel on as config: EngineConfig, ExecutorConfig,
// CudaOptions, and the process-wide CPU settings apply_process_switches() sets. Each guards
// a real choice (a fallback, an accuracy mode, a size); variants kept only for comparison
// are deleted once measured (bench/RESULTS.md).
//
// "0" turns a switch off, anything else turns it on; unset keeps the default:
//   TANDEM_CUDA_GRAPHS      decode steps as recorded CUDA graphs
//   TANDEM_VERIFY_GRAPHS    speculative verify steps as recorded graphs too (default on:
//                           engine/verify_graphs.h)
//   TANDEM_OVERLAP          the engine issues step n+1 before reading step n's tokens ("1"
//                           forces it on; unset: where the device runs asynchronously)
//   TANDEM_CUDA_GEMV        1–8 row linears stream their weights (off: the GEMMs)
//   TANDEM_CUDA_PDL         programmatic dependent launch between kernels
//   TANDEM_FP8_FAST_ACCUM   many-row FP8 GEMMs chain K in the tensor cores (off: promoted
//                           f32 sums every 128 columns, the accuracy fallback)
//   TANDEM_FP8_MOE_TC       the FP8 MoE experts' GEMMs on the e4m3 tensor cores (mma.sync;
//                           measured faster on an H200); off: the bf16-widening reference
//                           kernel, the fallback
//   TANDEM_GGUF_TILES       CUDA linears with GGUF block weights at 9-64 rows run the
//                           tensor-core tiles that decode the weight in shared memory
//                           (backend/gguf_tiles.h, cuda_block_tiles.h; measured faster on
//                           an H100); off: the decoded bf16 copy + cuBLASLt, the fallback
//   TANDEM_GGUF_MOE_TILES   GGUF MoE experts' grouped GEMMs on the same tiles (cuda_moe_gemm.h;
//                           measured faster on an H100, issue 42); off: the wmma kernels, the
//                           fallback
// Off unless set to something other than "0":
//   TANDEM_TP_EXECUTOR      the tensor-parallel executor even at --tensor-parallel-size 1: one
//                           rank with its communicator (NCCL on --device cuda), to measure
//                           the seam's cost and check it against the single worker
//                           (docs/tensor-parallel.md, "One rank")
//   TANDEM_VISION_TIMING    time the vision encoder on a GPU (a wait for the device before
//                           and after each step's image encoding; /stats
//                           vision_encode_ms_total; docs/images.md, "Measuring")
// Valued (a bad value is an error naming the variable):
//   TANDEM_ATTN_PREFILL=mma|sm90  mma: prefill attention on the mma.sync kernel everywhere
//                                 (the fallback should the sm90 kernel misbehave)
//   TANDEM_THREADS=N              the CPU backend's threads (--threads wins)
//   TANDEM_CPU_ISA=avx2|avx512    cap the CPU kernels' instruction set
//   TANDEM_CPU_BLOCK_ARITHMETIC=exact|int8  how the CPU backend multiplies GGUF block
//                                 weights (docs/gguf-kernels.md; checked where the backend
//                                 is made, cli/model_files.cpp); unset: its default
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "core/cpu_features.h"
#include "engine/engine.h"

namespace tandem::cli {

struct EnvSwitches {
  bool graphs = true;
  bool verify_graphs = true;
  Overlap overlap = Overlap::Auto;
  CudaOptions cuda;
  int threads = 0;                   // TANDEM_THREADS; 0: unset
  std::optional<CpuIsa> cpu_isa;     // TANDEM_CPU_ISA
  std::string cpu_block_arithmetic;  // TANDEM_CPU_BLOCK_ARITHMETIC; "": the default
  bool vision_timing = false;        // TANDEM_VISION_TIMING
  bool tp_executor = false;          // TANDEM_TP_EXECUTOR
  bool gguf_tiles = true;            // TANDEM_GGUF_TILES (a process-wide setting)
  bool gguf_moe_tiles = true;        // TANDEM_GGUF_MOE_TILES (a process-wide setting)
};

// A variable's value, or null when unset (std::getenv's contract).
using EnvLookup = std::function<const char*(const char*)>;

// The switches from `lookup`. Throws tandem::Error naming the variable and its value when
// a valued one is malformed.
EnvSwitches parse_env_switches(const EnvLookup& lookup);

// parse_env_switches of the process's environment, read on the first call.
const EnvSwitches& env_switches();

// Applies the process-wide settings of env_switches(): the ISA cap, the GGUF weight
// stream's variant, many-row tiles and MoE tiles, and the thread pool's size (threads_flag >
// 0, from --threads, wins over TANDEM_THREADS). Call once at start-up, before the first model op.
// False, with the error printed to stderr, when a variable is malformed (the command then exits 1).
bool apply_process_switches(int threads_flag = 0);

}  // namespace tandem::cli
