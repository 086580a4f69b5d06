// Tensor: a typed, shaped, contiguous (row-major) view of memory on one device.
// Ownership is shared through `storage`; views (rows(), reshape()) share it too.
// Tensors carry no autograd, no strides: every op in tandem reads and writes
// contiguous rows, which is what both backends want.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace tandem {

enum class Device : uint8_t { CPU, CUDA };

constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  int64_t operator[](int i) const { return dims[size_t(i < 0 ? ndim + i : i)]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[2, 3]"
};

struct Tensor {
  DType dtype = DType::F32;
  Device device = Device::CPU;
  Shape shape;
  void* data = nullptr;
  std::shared_ptr<void> storage;  // keeps `data` alive; null for borrowed views

  bool defined() const { return data != nullptr; }
  int ndim() const { return shape.ndim; }
  int64_t dim(int i) const { return shape[i]; }
  int64_t numel() const { return shape.numel(); }
  // Block types: rows of whole blocks (the last dim a multiple of the block).
  size_t nbytes() const { return size_t(rows()) * dtype_row_bytes(dtype, cols()); }
  // Product of all dims but the last: the number of rows an op iterates over.
  // (A product, not numel / cols: a tensor with no columns still has its rows.)
  int64_t rows() const {
    int64_t r = 1;
    for (int i = 0; i + 1 < ndim(); i++) r *= shape[i];
    return r;
  }
  int64_t cols() const { return ndim() == 0 ? 1 : shape[-1]; }

  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }

  // Same memory, another shape with the same numel.
  Tensor reshape(Shape s) const;
  // Rows [start, start+count) along the first dim.
  Tensor slice_rows(int64_t start, int64_t count) const;

  // A new zeroed host tensor.
  static Tensor empty_host(DType dtype, Shape shape);
  // A host tensor that borrows `data` (the caller keeps it alive).
  static Tensor borrow(void* data, DType dtype, Shape shape, Device device = Device::CPU);
};

}  // namespace tandem
