// CpuBackend::lora_add against a double loop: tokens of mixed slots (slot 0 untouched),
// the result of a token independent of which other tokens share the step.
#include <gtest/gtest.h>

#include "backend_test_util.h"
#include "core/error.h"

namespace tandem::test {
namespace cpu_lora_test {

std::vector<double> reference(const std::vector<float>& y, const std::vector<float>& x,
                              const std::vector<float>& a, const std::vector<float>& b,
                              const std::vector<int32_t>& slot, int64_t R, int64_t K, int64_t N) {
  std::vector<double> out(y.begin(), y.end());
  for (size_t t = 0; t < slot.size(); t++) {
    if (slot[t] == 0) continue;
    const int64_t s = slot[t];
    std::vector<double> v(size_t(R), 0.0);
    for (int64_t r = 0; r < R; r++)
      for (int64_t k = 0; k < K; k++) v[size_t(r)] += double(a[size_t((s * R + r) * K + k)]) * x[t * size_t(K) + size_t(k)];
    for (int64_t n = 0; n < N; n++)
      for (int64_t r = 0; r < R; r++) out[t * size_t(N) + size_t(n)] += double(b[size_t((s * N + n) * R + r)]) * v[size_t(r)];
  }
  return out;
}

TEST(CpuLora, AddsEachTokensSlotAndLeavesBaseRows) {
  auto be = make_cpu_backend();
  const int64_t S = 4, R = 6, K = 37, N = 29;
  const std::vector<int32_t> slot{0, 2, 1, 2, 0, 3, 3, 1, 0};
  const int64_t T = int64_t(slot.size());
  for (uint32_t seed : test_seeds()) {
    SCOPED_TRACE(seed_trace(seed));
    std::mt19937 rng(seed);
    auto x = random_vec(rng, size_t(T * K)), y = random_vec(rng, size_t(T * N));
    auto a = random_vec(rng, size_t(S * R * K)), b = random_vec(rng, size_t(S * N * R));
    LinearLora lora{device_f32(*be, a, {S, R, K}), device_f32(*be, b, {S, N, R})};
    Tensor out = device_f32(*be, y, {T, N});
    be->lora_add(out, device_f32(*be, x, {T, K}), lora,
                 LoraRows{.slots = device_i32(*be, slot, {T})});
    std::vector<float> got = to_vec(*be, out);
    EXPECT_LE(rel_err(got, reference(y, x, a, b, slot, R, K, N)), kTol);
    for (int64_t t = 0; t < T; t++) {
      if (slot[size_t(t)] != 0) continue;
      for (int64_t n = 0; n < N; n++) EXPECT_EQ(got[size_t(t * N + n)], y[size_t(t * N + n)]);
    }
    // Token 1 alone gives bit for bit what it gave among the others.
    Tensor one = device_f32(*be, std::vector<float>(y.begin() + N, y.begin() + 2 * N), {1, N});
    be->lora_add(one, device_f32(*be, std::vector<float>(x.begin() + K, x.begin() + 2 * K), {1, K}),
                 lora, LoraRows{.slots = device_i32(*be, {slot[1]}, {1})});
    std::vector<float> alone = to_vec(*be, one);
    for (int64_t n = 0; n < N; n++) EXPECT_EQ(alone[size_t(n)], got[size_t(N + n)]);
  }
}

TEST(CpuLora, RefusesASlotOutsideTheBank) {
  auto be = make_cpu_backend();
  LinearLora lora{be->zeros(DType::F32, {2, 2, 3}), be->zeros(DType::F32, {2, 4, 2})};
  Tensor out = be->zeros(DType::F32, {1, 4});
  EXPECT_THROW(be->lora_add(out, be->zeros(DType::F32, {1, 3}), lora,
                            LoraRows{.slots = device_i32(*be, {2}, {1})}),
               Error);
}

// LoraRows::order: the adapter tokens grouped by slot, each group in token order; base
// tokens left out.
TEST(LoraRowOrder, GroupsTheAdapterTokensBySlot) {
  EXPECT_EQ(lora_row_order(std::vector<int32_t>{0, 2, 1, 2, 0, 3, 3, 1, 0}),
            (std::vector<int32_t>{2, 7, 1, 3, 5, 6}));
  EXPECT_TRUE(lora_row_order(std::vector<int32_t>{0, 0}).empty());
  EXPECT_TRUE(lora_row_order(std::vector<int32_t>{}).empty());
}

// LoraRows::tiles: runs of one slot cut into tiles of at most kLoraTile, never two slots in
// one tile; the count first, then per tile begin · kLoraTile + rows - 1, the slot and the
// tile's tokens (the last repeated past rows).
TEST(LoraTiles, CutEachAdaptersRunAndNeverMixTwo) {
  static_assert(kLoraTile == 8 && kLoraTileInts == 10);
  std::vector<int32_t> order_slots(11, 1);  // 11 tokens of slot 1, 2 of slot 3, 1 of 4
  order_slots.insert(order_slots.end(), {3, 3, 4});
  std::vector<int32_t> order;
  for (int32_t i = 0; i < 14; i++) order.push_back(100 + i);
  EXPECT_EQ(lora_tiles(order, order_slots),
            (std::vector<int32_t>{4,
                                  0 * 8 + 7, 1, 100, 101, 102, 103, 104, 105, 106, 107,
                                  8 * 8 + 2, 1, 108, 109, 110, 110, 110, 110, 110, 110,
                                  11 * 8 + 1, 3, 111, 112, 112, 112, 112, 112, 112, 112,
                                  13 * 8 + 0, 4, 113, 113, 113, 113, 113, 113, 113, 113}));
  EXPECT_EQ(lora_tiles({}, {}), (std::vector<int32_t>{0}));
  // One token per adapter: a tile each.
  const std::vector<int32_t> three = lora_tiles(std::vector<int32_t>{7, 3, 5},
                                                std::vector<int32_t>{1, 2, 5});
  ASSERT_EQ(three.size(), size_t(1 + 3 * kLoraTileInts));
  EXPECT_EQ(three[0], 3);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(three[size_t(1 + i * kLoraTileInts)], i * 8) << "tile " << i;
    EXPECT_EQ(three[size_t(2 + i * kLoraTileInts)], (std::vector<int32_t>{1, 2, 5})[size_t(i)]);
    EXPECT_EQ(three[size_t(3 + i * kLoraTileInts)], (std::vector<int32_t>{7, 3, 5})[size_t(i)]);
  }
}

}  // namespace cpu_lora_test
}  // namespace tandem::test
