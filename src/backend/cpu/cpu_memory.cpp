// Memory verbs of the CPU backend. Storage keeps the dtype asked for: f32 activations,
// 16-bit weights (weight_dtype), i32 index arrays, an f8_e4m3 KV cache; a host tensor of
// another float dtype is converted on upload.
#include <cblas.h>

#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

CpuBackend::CpuBackend(ThreadPool* pool, CpuIsa isa)
    : pool_(pool ? pool : &ThreadPool::global()), isa_(isa), activations_(kMaxCachedActivations) {
  if (isa > cpu_max_isa())
    fail("cpu backend: {} kernels asked of a cpu without them", cpu_isa_name(isa));
  // The pool splits every GEMM; OpenBLAS's own threads would oversubscribe the cores.
  openblas_set_num_threads(1);
}

DType CpuBackend::weight_dtype(DType stored) const {
  // FP8 weights stay FP8: the quantized linear (cpu_linear_fp8.cpp) reads them with
  // their scales; any other weight-taking op refuses them. ggml's block types stay in their
  // blocks for linear, embedding and moe_experts (cpu_block_gemm.h).
  const bool kept = stored == DType::BF16 || stored == DType::F16 || stored == DType::F8E4M3 ||
                    dtype_is_block(stored);
  return kept ? stored : DType::F32;
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

Tensor CpuBackend::alloc(DType dtype, Shape shape) {
  // "Uninitialized": a reused buffer holds what its last user left. Small tensors come
  // from the heap (zero-filled), where malloc reuses them cheaply anyway.
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  const size_t bytes = t.nbytes();
  if (bytes < cpu::BufferCache::kMinBytes) return Tensor::empty_host(dtype, shape);
  t.storage = activations_.take(bytes);
  t.data = t.storage.get();
  return t;
}

Tensor CpuBackend::zeros(DType dtype, Shape shape) {
  return host_tensor(dtype, shape, /*weight=*/false);
}

Tensor CpuBackend::host_tensor(DType dtype, Shape shape, bool weight) {
  // Below these sizes a tensor stays in the caches or is per-step data (the step's i32
  // arrays); only weights are packed into the arena, whose space is never reused.
  constexpr size_t kMinWeightBytes = size_t(64) << 10, kMinOwnMappingBytes = size_t(2) << 20;
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  const size_t bytes = t.nbytes();
  if (weight && dtype != DType::I32 && bytes >= kMinWeightBytes)
    t.storage = weights_.allocate(bytes);
  else if (!weight && bytes >= kMinOwnMappingBytes)
    t.storage = cpu::map_huge(bytes);
  else
    return Tensor::empty_host(dtype, shape);
  t.data = t.storage.get();
  return t;
}

Tensor CpuBackend::upload(const Tensor& host, DType dtype) {
  if (!host.defined()) fail("upload: host tensor {} is undefined", host.shape.str());
  if (host.device != Device::CPU) fail("upload: source must be a host tensor");
  // Under Int8 a block weight's panels replace its blocks (cpu_block_panel_store.h).
  if (dtype == host.dtype && dtype_is_block(dtype) &&
      block_arithmetic_ == cpu::BlockArithmetic::Int8)
    if (Tensor packed = panels_.upload(*pool_, host); packed.defined()) return packed;
  Tensor out = host_tensor(dtype, host.shape, /*weight=*/true);
  if (out.dtype == DType::I32) {
    if (host.dtype != DType::I32)
      fail("upload: i32 tensor {} requested from {} data", host.shape.str(),
           dtype_name(host.dtype));
    std::memcpy(out.data, host.data, host.nbytes());
    return out;
  }
  if (host.dtype == DType::I32)
    fail("upload: {} tensor {} requested from i32 data", dtype_name(dtype), host.shape.str());
  if (out.dtype == host.dtype) {
    std::memcpy(out.data, host.data, host.nbytes());
    return out;
  }
  if (out.dtype == DType::F32) {
    convert_to_f32(host.data, host.dtype, out.ptr<float>(), size_t(host.numel()));
    return out;
  }
  // Another narrow dtype: rounds once, from the f32 value.
  Tensor f32 = Tensor::empty_host(DType::F32, host.shape);
  convert_to_f32(host.data, host.dtype, f32.ptr<float>(), size_t(host.numel()));
  convert_from_f32(f32.ptr<float>(), out.data, out.dtype, size_t(host.numel()));
  return out;
}

Tensor CpuBackend::to_host_f32(const Tensor& t) {
  if (!t.defined()) fail("to_host_f32: tensor {} is undefined", t.shape.str());
  if (t.device != Device::CPU) fail("to_host_f32: tensor {} is not on the cpu", t.shape.str());
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  if (const cpu::PanelLookup p = dtype_is_block(t.dtype) ? panels_.find(t) : cpu::PanelLookup{};
      p.found()) {  // its values live in its panels
    cpu::BlockPanelStore::decode_rows(p, t.dtype, t.cols(), p.row0, p.row0 + t.rows(),
                                      out.ptr<float>());
    return out;
  }
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
  if (dtype_is_block(src.dtype) && panels_.find(src).found())
    fail("copy: the {} weight {} is held as panels, not blocks (to_host_f32 reads its values)",
         dtype_name(src.dtype), src.shape.str());
  std::memmove(dst.data, src.data, src.nbytes());
}

}  // namespace tandem
