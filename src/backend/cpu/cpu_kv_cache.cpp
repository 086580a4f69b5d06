#include "backend/cpu/cpu_kv_cache.h"

#include "backend/cpu/cpu_common.h"
#include "core/dtype.h"
#include "core/error.h"

namespace tandem::cpu {

namespace {

bool is_kv_dtype(DType d) {
  return d == DType::F32 || d == DType::F8E4M3;
}

}  // namespace

DType check_kv_cache(const PagedKv& cache, std::string_view op) {
  for (const Tensor* t : {&cache.k, &cache.v}) {
    const std::string_view name = t == &cache.k ? "cache.k" : "cache.v";
    if (!t->defined()) fail("{}: tensor '{}' is undefined", op, name);
    if (!is_kv_dtype(t->dtype))
      fail("{}: KV cache dtype {} is not supported on the cpu (f32 or f8_e4m3), tensor '{}' {}", op,
           dtype_name(t->dtype), name, t->shape.str());
    check_tensor(*t, t->dtype, op, name);  // on the cpu
  }
  TANDEM_CHECK(cache.k.dtype == cache.v.dtype && cache.k.shape == cache.v.shape,
               "{}: cache.k ({} {}) and cache.v ({} {}) differ", op, dtype_name(cache.k.dtype),
               cache.k.shape.str(), dtype_name(cache.v.dtype), cache.v.shape.str());
  return cache.k.dtype;
}

void store_kv_values(Tensor& cache, int64_t offset, const float* src, int64_t n) {
  TANDEM_CHECK(is_kv_dtype(cache.dtype), "store_kv_values: KV cache dtype {} is not supported",
               dtype_name(cache.dtype));
  char* dst = static_cast<char*>(cache.data) + size_t(offset) * dtype_size(cache.dtype);
  convert_from_f32(src, dst, cache.dtype, size_t(n));
}

}  // namespace tandem::cpu
