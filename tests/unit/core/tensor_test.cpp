// Tensor and Shape (core/tensor.h): shapes, views that share storage, host allocation.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace tandem {
namespace tensor_test {

TEST(Tensor, ShapeCountsComparesAndPrints) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.ndim, 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s.str(), "[2, 3, 4]");
  EXPECT_TRUE((s == Shape{2, 3, 4}));
  EXPECT_FALSE((s == Shape{2, 12}));
  EXPECT_EQ(Shape{}.numel(), 1);  // a scalar
  EXPECT_THROW((Shape{1, 2, 3, 4, 5}), Error);
}

TEST(Tensor, EmptyHostIsZeroedAlignedAndOwned) {
  Tensor t = Tensor::empty_host(DType::BF16, {3, 5});
  EXPECT_EQ(t.nbytes(), 30u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  EXPECT_NE(t.storage, nullptr);
  for (int i = 0; i < 15; i++) EXPECT_EQ(t.ptr<uint16_t>()[i], 0);
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(t.cols(), 5);
}

TEST(Tensor, ReshapeAndSliceAreViewsOfTheSameStorage) {
  Tensor t = Tensor::empty_host(DType::F32, {4, 6});
  for (int i = 0; i < 24; i++) t.ptr<float>()[i] = float(i);
  Tensor r = t.reshape({2, 3, 4});
  EXPECT_EQ(r.data, t.data);
  EXPECT_EQ(r.storage, t.storage);
  EXPECT_EQ(r.rows(), 6);  // all dims but the last
  EXPECT_THROW(t.reshape({5, 5}), Error);
  Tensor rows = t.slice_rows(1, 2);
  EXPECT_TRUE((rows.shape == Shape{2, 6}));
  EXPECT_EQ(rows.ptr<float>()[0], 6.f);
  EXPECT_EQ(rows.storage, t.storage);  // keeps the allocation alive
  rows.ptr<float>()[0] = -1.f;
  EXPECT_EQ(t.ptr<float>()[6], -1.f);
  Tensor stacked = t.reshape({2, 2, 6}).slice_rows(1, 1);  // a slice of a 3-d view
  EXPECT_EQ(stacked.ptr<float>()[0], 12.f);
  EXPECT_THROW(t.slice_rows(3, 2), Error);
  EXPECT_THROW(t.slice_rows(-1, 1), Error);
}

TEST(Tensor, BorrowOwnsNothing) {
  int32_t ids[3] = {4, 5, 6};
  Tensor t = Tensor::borrow(ids, DType::I32, {3});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.storage, nullptr);
  EXPECT_EQ(t.ptr<int32_t>()[2], 6);
  EXPECT_EQ(t.device, Device::CPU);
  EXPECT_FALSE(Tensor{}.defined());
}

}  // namespace tensor_test
}  // namespace tandem

namespace tandem {
namespace tensor_test {

// A tensor whose last dim is 0 has its rows and no bytes (nbytes once divided by that dim).
TEST(Tensor, EmptyLastDimHasRowsAndNoBytes) {
  Tensor t = Tensor::empty_host(DType::F32, {3, 0});
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_EQ(Tensor::empty_host(DType::Q4_K, {2, 0}).nbytes(), 0u);
}

}  // namespace tensor_test
}  // namespace tandem
