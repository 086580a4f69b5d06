// Launcher-side helpers shared by the CUDA op files (host code, safe for nvcc: no fmt).
// Every launcher validates its tensors with these before launching, so a wrong dtype,
// device or shape fails with the op, the tensor and what it got instead of a bad kernel.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace tandem::cuda {

// Fails unless `t` is defined, on CUDA and of `dtype`:
//   "rms_norm: tensor 'x' must be bf16 on cuda, got f32 on the cpu (shape [2, 3])"
void check_tensor(const Tensor& t, DType dtype, const char* op, const char* name);
// Fails unless `t` is defined and on CUDA (any dtype).
void check_on_device(const Tensor& t, const char* op, const char* name);
// Fails unless `t` is BF16 or F32 on CUDA (the float types the elementwise ops take).
void check_float(const Tensor& t, const char* op, const char* name);

// A process-wide switch, on by default (PDL: every launch reads it; CudaBackend sets it from
// CudaOptions::pdl).
class Switch {
 public:
  bool on() const { return on_.load(std::memory_order_relaxed); }
  void set(bool on) { on_.store(on, std::memory_order_relaxed); }

 private:
  std::atomic<bool> on_{true};
};

// Whether kernels launched through launch_pdl (cuda_pdl.cuh) carry the programmatic
// dependent launch attribute (CudaOptions::pdl).
bool pdl_enabled();
void set_pdl_enabled(bool on);

// Raises `kernel`'s dynamic shared-memory limit to `bytes` on the current device, once
// per device: `ready` is that kernel's own flag word (a bit per device), so steady-state
// launches make no host call for it. `what` names the launcher in errors.
void allow_dynamic_smem(const void* kernel, int bytes, std::atomic<uint64_t>& ready,
                        const char* what);

// "op: a [2, 3], b [4]" style fragments for shape errors.
inline std::string shape_of(const char* name, const Tensor& t) {
  return std::string(name) + " " + t.shape.str();
}

// Builds the message only when the check fails.
#define TANDEM_CUDA_REQUIRE(cond, message)     \
  do {                                         \
    if (!(cond)) ::tandem::cuda_fail(message); \
  } while (0)

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// True when `p` may be read with 16-byte vector loads.
inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Blocks for a grid-stride loop over n items: enough to fill the GPU, never more than n
// needs. At least 1 so that launches with n == 0 stay valid (the kernel does nothing).
inline unsigned grid_stride_blocks(int64_t n, int threads) {
  const int64_t needed = ceil_div(n, threads);
  const int64_t cap = 132 * 16;  // H200: 132 SMs; 16 resident blocks each is plenty
  return unsigned(needed < 1 ? 1 : (needed > cap ? cap : needed));
}

}  // namespace tandem::cuda
