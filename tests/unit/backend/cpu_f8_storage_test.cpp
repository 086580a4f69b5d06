// How the CPU backend holds f8_e4m3 tensors (the KV cache's compact form): bytes, read
// back through the same conversion, and the attention's row decoder bit for bit. (The
// format itself: tests/unit/core/f8e4m3_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/backend.h"
#include "backend/cpu/cpu_kv_cache.h"
#include "core/dtype.h"

namespace tandem {
namespace cpu_f8_storage_test {

bool is_nan_code(int code) {
  return (code & 0x7f) == 0x7f;
}

// The CPU attention's vectorizable decoder agrees with the reference conversion.
TEST(F8E4M3, CpuRowDecoderMatchesTheReferenceBitForBit) {
  uint8_t codes[256];
  for (int c = 0; c < 256; c++) codes[c] = uint8_t(c);
  float decoded[256];
  cpu::decode_f8e4m3(codes, decoded, 256);
  for (int c = 0; c < 256; c++) {
    const float want = f8e4m3_to_f32(uint8_t(c));
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(decoded[c])) << c;
      continue;
    }
    uint32_t got_bits, want_bits;
    std::memcpy(&got_bits, &decoded[c], 4);
    std::memcpy(&want_bits, &want, 4);
    EXPECT_EQ(got_bits, want_bits) << "code " << c;
  }
}

TEST(F8E4M3, CpuBackendStoresF8TensorsAsBytes) {
  auto be = make_cpu_backend();
  Tensor z = be->zeros(DType::F8E4M3, {3, 4});
  ASSERT_EQ(z.dtype, DType::F8E4M3);
  EXPECT_EQ(z.nbytes(), 12u);
  Tensor zero = be->to_host_f32(z);
  for (int64_t i = 0; i < zero.numel(); i++) EXPECT_EQ(zero.ptr<float>()[i], 0.f);
  Tensor host = Tensor::empty_host(DType::F32, {4});
  const float values[4] = {1.0625f, -500.f, 0.3f, 3 * std::ldexp(1.f, -10)};
  std::memcpy(host.data, values, sizeof(values));
  Tensor up = be->upload(host, DType::F8E4M3);
  ASSERT_EQ(up.dtype, DType::F8E4M3);
  const uint8_t* bytes = up.ptr<uint8_t>();
  for (int i = 0; i < 4; i++) EXPECT_EQ(bytes[i], f32_to_f8e4m3(values[i])) << i;
  Tensor back = be->to_host_f32(up);
  for (int i = 0; i < 4; i++) EXPECT_EQ(back.ptr<float>()[i], f8e4m3_to_f32(bytes[i])) << i;
  Tensor copy = be->alloc(DType::F8E4M3, {4});
  be->copy(copy, up);
  EXPECT_EQ(std::memcmp(copy.data, up.data, 4), 0);
}

}  // namespace cpu_f8_storage_test
}  // namespace tandem
