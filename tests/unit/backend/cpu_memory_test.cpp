// Memory verbs of the CPU backend: storage dtypes, upload conversions, copies.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/dtype.h"
#include "core/error.h"

namespace tandem {
namespace cpu_memory_test {

using test::host_f32;
using test::host_i32;

Tensor host_u16(const std::vector<uint16_t>& bits, DType dtype) {
  Tensor t = Tensor::empty_host(dtype, {int64_t(bits.size())});
  std::memcpy(t.data, bits.data(), bits.size() * 2);
  return t;
}

TEST(CpuMemory, IdentifiesItself) {
  auto be = make_cpu_backend();
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_EQ(be->device(), Device::CPU);
  EXPECT_EQ(be->act_dtype(), DType::F32);
}

// Storage keeps the dtype asked for: f32 activations, 16-bit weights, i32 indices.
TEST(CpuMemory, StorageKeepsTheAskedDtype) {
  auto be = make_cpu_backend();
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32}) {
    Tensor t = be->alloc(d, {3, 5});
    EXPECT_EQ(t.dtype, d);
    EXPECT_EQ(t.shape, Shape({3, 5}));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  }
  Tensor z = be->zeros(DType::BF16, {7, 9});
  ASSERT_EQ(z.dtype, DType::BF16);
  for (int64_t i = 0; i < z.numel(); i++) EXPECT_EQ(z.ptr<uint16_t>()[i], 0u);
}

// A 16-bit weight uploaded as itself keeps its bits; weight_dtype asks for exactly that.
TEST(CpuMemory, SixteenBitWeightsStaySixteenBit) {
  auto be = make_cpu_backend();
  for (DType d : {DType::BF16, DType::F16}) {
    EXPECT_EQ(be->weight_dtype(d), d);
    Tensor host = host_u16({0x3F80, 0xC000, 0x1234}, d);
    Tensor t = be->upload(host, be->weight_dtype(d));
    ASSERT_EQ(t.dtype, d);
    EXPECT_NE(t.data, host.data);
    for (int i = 0; i < 3; i++) EXPECT_EQ(t.ptr<uint16_t>()[i], host.ptr<uint16_t>()[i]);
  }
  EXPECT_EQ(be->weight_dtype(DType::F32), DType::F32);
}

TEST(CpuMemory, UploadCopiesRatherThanAliases) {
  auto be = make_cpu_backend();
  Tensor h = host_f32({1.f, 2.f, 3.f}, {3});
  Tensor d = be->upload(h, DType::F32);
  h.ptr<float>()[0] = 99.f;
  EXPECT_NE(d.data, h.data);
  EXPECT_EQ(d.ptr<float>()[0], 1.f);
}

// Hand-derived bit patterns: bf16 is the top half of an f32; f16 has 5 exponent bits.
TEST(CpuMemory, UploadConvertsKnownBf16AndF16Values) {
  auto be = make_cpu_backend();
  Tensor b =
      be->upload(host_u16({0x3F80, 0xC000, 0x3FC0, 0x0000, 0x4049}, DType::BF16), DType::F32);
  ASSERT_EQ(b.dtype, DType::F32);
  EXPECT_EQ(b.ptr<float>()[0], 1.f);
  EXPECT_EQ(b.ptr<float>()[1], -2.f);
  EXPECT_EQ(b.ptr<float>()[2], 1.5f);
  EXPECT_EQ(b.ptr<float>()[3], 0.f);
  EXPECT_EQ(b.ptr<float>()[4], 3.140625f);  // 0x40490000
  Tensor f = be->upload(host_u16({0x3C00, 0xC000, 0x3555, 0x0001, 0x7BFF}, DType::F16), DType::F32);
  EXPECT_EQ(f.ptr<float>()[0], 1.f);
  EXPECT_EQ(f.ptr<float>()[1], -2.f);
  EXPECT_EQ(f.ptr<float>()[2], 0.333251953125f);       // 1 + 0x155/1024, times 2^-2
  EXPECT_EQ(f.ptr<float>()[3], std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(f.ptr<float>()[4], 65504.f);               // largest finite
}

// f32 -> bf16/f16 (host) -> upload -> to_host_f32 keeps the 16-bit value exactly and
// stays within half an ulp of the original.
TEST(CpuMemory, Bf16AndF16RoundTrips) {
  auto be = make_cpu_backend();
  std::mt19937 rng(7);
  const std::vector<float> x = test::random_vec(rng, 257, -8.f, 8.f);
  for (DType d : {DType::BF16, DType::F16}) {
    Tensor h = Tensor::empty_host(d, {int64_t(x.size())});
    convert_from_f32(x.data(), h.data, d, x.size());
    Tensor back = be->to_host_f32(be->upload(h, d));
    const double half_ulp = d == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
    for (size_t i = 0; i < x.size(); i++) {
      const uint16_t bits = h.ptr<uint16_t>()[i];
      const float expect = d == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      EXPECT_EQ(back.ptr<float>()[i], expect);
      EXPECT_LE(std::abs(double(back.ptr<float>()[i]) - x[i]), half_ulp * std::abs(x[i]) + 1e-7);
    }
  }
}

TEST(CpuMemory, I32UploadAndReadBack) {
  auto be = make_cpu_backend();
  Tensor d = be->upload(host_i32({5, -3, 1 << 20}, {3}), DType::I32);
  ASSERT_EQ(d.dtype, DType::I32);
  EXPECT_EQ(d.ptr<int32_t>()[1], -3);
  Tensor f = be->to_host_f32(d);
  EXPECT_EQ(f.dtype, DType::F32);
  EXPECT_EQ(f.ptr<float>()[2], float(1 << 20));
  EXPECT_THROW(be->upload(host_f32({1.f}, {1}), DType::I32), Error);
  EXPECT_THROW(be->upload(host_i32({1}, {1}), DType::F32), Error);
}

TEST(CpuMemory, WriteI32AndCopy) {
  auto be = make_cpu_backend();
  Tensor dst = be->zeros(DType::I32, {4});
  const int32_t src[3] = {7, 8, 9};
  be->write_i32(dst, src, 3);
  EXPECT_EQ(dst.ptr<int32_t>()[2], 9);
  EXPECT_EQ(dst.ptr<int32_t>()[3], 0);
  EXPECT_THROW(be->write_i32(dst, src, 5), Error);
  Tensor f = be->zeros(DType::F32, {4});
  EXPECT_THROW(be->write_i32(f, src, 1), Error);

  Tensor a = test::device_f32(*be, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = be->alloc(DType::F32, {3, 2});
  be->copy(b, a);
  EXPECT_EQ(test::to_vec(*be, b), test::to_vec(*be, a));
  Tensor small = be->alloc(DType::F32, {5});
  EXPECT_THROW(be->copy(small, a), Error);
  EXPECT_THROW(be->copy(dst, a), Error);  // dtype mismatch
}

}  // namespace cpu_memory_test
}  // namespace tandem
