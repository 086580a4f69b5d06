#include "backend/cuda/cuda_check.h"

#include <atomic>

#include "core/error.h"

namespace tandem::cuda {

namespace {

const char* device_name(Device d) {
  return d == Device::CUDA ? "cuda" : "the cpu";
}

Switch& pdl_switch() {
  static Switch on;
  return on;
}

}  // namespace

bool pdl_enabled() {
  return pdl_switch().on();
}

void set_pdl_enabled(bool on) {
  pdl_switch().set(on);
}

void allow_dynamic_smem(const void* kernel, int bytes, std::atomic<uint64_t>& ready,
                        const char* what) {
  int device = 0;
  cuda_check(cudaGetDevice(&device), what);
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (ready.load(std::memory_order_relaxed) & bit) != 0) return;
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess)
    fail("{}: cudaFuncSetAttribute({} bytes of shared memory): {}", what, bytes,
         cudaGetErrorString(err));
  ready.fetch_or(bit, std::memory_order_relaxed);
}

void check_on_device(const Tensor& t, const char* op, const char* name) {
  if (!t.defined()) fail("{}: tensor '{}' is undefined", op, name);
  if (t.device != Device::CUDA)
    fail("{}: tensor '{}' must be on cuda, got {} on {} (shape {})", op, name, dtype_name(t.dtype),
         device_name(t.device), t.shape.str());
}

void check_tensor(const Tensor& t, DType dtype, const char* op, const char* name) {
  if (!t.defined()) fail("{}: tensor '{}' is undefined", op, name);
  if (t.device != Device::CUDA || t.dtype != dtype)
    fail("{}: tensor '{}' must be {} on cuda, got {} on {} (shape {})", op, name, dtype_name(dtype),
         dtype_name(t.dtype), device_name(t.device), t.shape.str());
}

void check_float(const Tensor& t, const char* op, const char* name) {
  check_on_device(t, op, name);
  if (t.dtype != DType::BF16 && t.dtype != DType::F32)
    fail("{}: tensor '{}' must be bf16 or f32, got {} (shape {})", op, name, dtype_name(t.dtype),
         t.shape.str());
}

}  // namespace tandem::cuda
