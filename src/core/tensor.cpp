#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace tandem {

Shape::Shape(std::initializer_list<int64_t> d) {
  TANDEM_CHECK(d.size() <= kMaxDims, "too many dims: {}", d.size());
  for (int64_t v : d) dims[size_t(ndim++)] = v;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= dims[size_t(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (dims[size_t(i)] != o.dims[size_t(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; i++) s += (i ? ", " : "") + std::to_string(dims[size_t(i)]);
  return s + "]";
}

Tensor Tensor::reshape(Shape s) const {
  TANDEM_CHECK(s.numel() == numel(), "reshape {} -> {}", shape.str(), s.str());
  Tensor t = *this;
  t.shape = s;
  return t;
}

Tensor Tensor::slice_rows(int64_t start, int64_t count) const {
  TANDEM_CHECK(ndim() >= 1 && start >= 0 && start + count <= shape[0], "slice {}+{} of {}",
               start, count, shape.str());
  Tensor t = *this;
  int64_t row = numel() / shape[0];
  t.shape.dims[0] = count;
  t.data = static_cast<char*>(data) + dtype_row_bytes(dtype, start * row);
  return t;
}

Tensor Tensor::empty_host(DType dtype, Shape shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  size_t bytes = std::max<size_t>(t.nbytes(), 1);
  // 64-byte alignment keeps SIMD loads on one cache line.
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) fail("out of host memory allocating {} bytes", bytes);
  std::memset(p, 0, bytes);
  t.storage = std::shared_ptr<void>(p, std::free);
  t.data = p;
  return t;
}

Tensor Tensor::borrow(void* data, DType dtype, Shape shape, Device device) {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.data = data;
  t.device = device;
  return t;
}

}  // namespace tandem
