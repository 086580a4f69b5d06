// Memory verbs of the CPU backend. Float data of any storage dtype becomes f32 here,
// so every op reads f32 (or i32 index arrays), except that f8_e4m3 is kept as asked: it
// is the KV cache's compact form, which only write_kv and attention read
// (cpu_kv_cache.h).
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

namespace {

// The dtype the CPU backend stores for a requested dtype: f32 for any float type but
// f8_e4m3 (a KV cache), which stays f8_e4m3.
DType storage_dtype(DType requested) {
  if (requested == DType::I32 || requested == DType::F8E4M3) return requested;
  return DType::F32;
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
  if (out.dtype == DType::F8E4M3 && host.dtype != DType::F8E4M3) {  // rounds through f32
    Tensor f32 = Tensor::empty_host(DType::F32, host.shape);
    convert_to_f32(host.data, host.dtype, f32.ptr<float>(), size_t(host.numel()));
    convert_from_f32(f32.ptr<float>(), out.data, DType::F8E4M3, size_t(host.numel()));
    return out;
  }
  if (out.dtype == DType::F8E4M3) {
    std::memcpy(out.data, host.data, host.nbytes());
    return out;
  }
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
