// Memory verbs of the CPU backend. Float data of any storage dtype becomes f32 here,
// so every op reads f32 (or i32 index arrays) and nothing else.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

namespace {

// The dtype the CPU backend stores for a requested dtype: f32 for any float type.
DType storage_dtype(DType requested) {
  return requested == DType::I32 ? DType::I32 : DType::F32;
}

}  // namespace

CpuBackend::CpuBackend(ThreadPool* pool) : pool_(pool ? pool : &ThreadPool::global()) {}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

Tensor CpuBackend::alloc(DType dtype, Shape shape) {
  // empty_host zero-fills; "uninitialized" only promises nothing about the contents.
  return Tensor::empty_host(storage_dtype(dtype), shape);
}

Tensor CpuBackend::zeros(DType dtype, Shape shape) {
  return Tensor::empty_host(storage_dtype(dtype), shape);
}

Tensor CpuBackend::upload(const Tensor& host, DType dtype) {
  if (!host.defined()) fail("upload: host tensor {} is undefined", host.shape.str());
  if (host.device != Device::CPU) fail("upload: source must be a host tensor");
  Tensor out = Tensor::empty_host(storage_dtype(dtype), host.shape);
  if (out.dtype == DType::I32) {
    if (host.dtype != DType::I32)
      fail("upload: i32 tensor {} requested from {} data", host.shape.str(),
           dtype_name(host.dtype));
    std::memcpy(out.data, host.data, host.nbytes());
    return out;
  }
  if (host.dtype == DType::I32)
    fail("upload: {} tensor {} requested from i32 data", dtype_name(dtype), host.shape.str());
  convert_to_f32(host.data, host.dtype, out.ptr<float>(), size_t(host.numel()));
  return out;
}

Tensor CpuBackend::to_host_f32(const Tensor& t) {
  if (!t.defined()) fail("to_host_f32: tensor {} is undefined", t.shape.str());
  if (t.device != Device::CPU) fail("to_host_f32: tensor {} is not on the cpu", t.shape.str());
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  convert_to_f32(t.data, t.dtype, out.ptr<float>(), size_t(t.numel()));
  return out;
}

void CpuBackend::write_i32(Tensor& dst, const int32_t* src, int64_t n) {
  cpu::check_tensor(dst, DType::I32, "write_i32", "dst");
  if (n < 0 || n > dst.numel())
    fail("write_i32: {} elements do not fit in dst {}", n, dst.shape.str());
  if (n > 0) std::memcpy(dst.data, src, size_t(n) * sizeof(int32_t));
}

void CpuBackend::copy(Tensor& dst, const Tensor& src) {
  cpu::check_tensor(src, src.dtype, "copy", "src");
  cpu::check_tensor(dst, src.dtype, "copy", "dst");
  if (dst.numel() != src.numel())
    fail("copy: dst {} and src {} differ in size", dst.shape.str(), src.shape.str());
  std::memmove(dst.data, src.data, src.nbytes());
}

}  // namespace tandem
