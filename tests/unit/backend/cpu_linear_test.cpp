// linear, embedding and gather_rows against naive double loops.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"

namespace tandem {
namespace cpu_linear_test {

using test::device_f32;
using test::device_i32;
using test::kTol;
using test::rel_err;
using test::to_vec;

// out[t, n] = Σ_k x[t, k] w[n, k] + bias[n]
std::vector<double> linear_ref(const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>* bias, int T, int K, int N) {
  std::vector<double> out(size_t(T * N));
  for (int t = 0; t < T; t++)
    for (int n = 0; n < N; n++) {
      double s = bias ? (*bias)[size_t(n)] : 0.0;
      for (int k = 0; k < K; k++) s += double(x[size_t(t * K + k)]) * w[size_t(n * K + k)];
      out[size_t(t * N + n)] = s;
    }
  return out;
}

struct LinearShape {
  int T, K, N;
};

TEST(CpuLinear, MatchesNaiveWithAndWithoutBias) {
  auto be = make_cpu_backend();
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (LinearShape s :
         {LinearShape{1, 64, 48}, {1, 7, 3}, {7, 33, 17}, {32, 128, 96}, {3, 256, 1}}) {
      SCOPED_TRACE(testing::Message() << "T=" << s.T << " K=" << s.K << " N=" << s.N);
      auto x = test::random_vec(rng, size_t(s.T * s.K));
      auto w = test::random_vec(rng, size_t(s.N * s.K));
      auto bias = test::random_vec(rng, size_t(s.N));
      Tensor xd = device_f32(*be, x, {s.T, s.K}), wd = device_f32(*be, w, {s.N, s.K});
      Tensor out = be->alloc(DType::F32, {s.T, s.N});
      be->linear(out, xd, Linear{wd});
      EXPECT_LE(rel_err(to_vec(*be, out), linear_ref(x, w, nullptr, s.T, s.K, s.N)), kTol);
      be->linear(out, xd, Linear{wd, device_f32(*be, bias, {s.N})});
      EXPECT_LE(rel_err(to_vec(*be, out), linear_ref(x, w, &bias, s.T, s.K, s.N)), kTol);
    }
  }
}

// Leading dims are flattened: a [T, H, Dh] input is T*H rows of Dh.
TEST(CpuLinear, AcceptsExtraLeadingDims) {
  auto be = make_cpu_backend();
  std::mt19937 rng(3);
  auto x = test::random_vec(rng, 2 * 3 * 16);
  auto w = test::random_vec(rng, 8 * 16);
  Tensor out = be->alloc(DType::F32, {2, 3, 8});
  be->linear(out, device_f32(*be, x, {2, 3, 16}), Linear{device_f32(*be, w, {8, 16})});
  EXPECT_LE(rel_err(to_vec(*be, out), linear_ref(x, w, nullptr, 6, 16, 8)), kTol);
}

TEST(CpuLinear, RejectsMismatchedShapes) {
  auto be = make_cpu_backend();
  Tensor x = be->zeros(DType::F32, {2, 16}), w = be->zeros(DType::F32, {8, 15});
  Tensor out = be->alloc(DType::F32, {2, 8});
  EXPECT_THROW(be->linear(out, x, Linear{w}), Error);
  Tensor w2 = be->zeros(DType::F32, {8, 16});
  Tensor bad_out = be->alloc(DType::F32, {2, 9});
  EXPECT_THROW(be->linear(bad_out, x, Linear{w2}), Error);
  EXPECT_THROW(be->linear(out, x, Linear{w2, be->zeros(DType::F32, {7})}), Error);
  Tensor ids = be->zeros(DType::I32, {2, 16});
  EXPECT_THROW(be->linear(out, ids, Linear{w2}), Error);
}

// A quantized Linear the CPU does not implement is refused, never run as if it were plain.
// An adapted one runs its W and b: the adapters are lora_add's (backend/linear.h).
TEST(CpuLinear, RefusesUnknownQuantizationAndLeavesAdaptersToLoraAdd) {
  auto be = make_cpu_backend();
  Tensor x = be->zeros(DType::F32, {2, 16}), w = be->zeros(DType::F32, {8, 16});
  Tensor out = be->alloc(DType::F32, {2, 8});
  Linear quantized{.weight = w, .quant = LinearQuant{}};
  EXPECT_THROW(be->linear(out, x, quantized), Error);
  Linear adapted{.weight = w, .lora = LinearLora{}};
  EXPECT_NO_THROW(be->linear(out, x, adapted));
  EXPECT_NO_THROW(be->linear(out, x, Linear{.weight = w}));
}

TEST(CpuEmbedding, LooksUpAndScales) {
  auto be = make_cpu_backend();
  std::mt19937 rng(11);
  const int V = 50, D = 24;
  auto table = test::random_vec(rng, size_t(V * D));
  const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
  Tensor out = be->alloc(DType::F32, {5, D});
  be->embedding(out, device_f32(*be, table, {V, D}), device_i32(*be, ids, {5}), 2.5f);
  std::vector<double> ref;
  for (int32_t id : ids)
    for (int d = 0; d < D; d++) ref.push_back(double(table[size_t(id * D + d)]) * 2.5);
  EXPECT_LE(rel_err(to_vec(*be, out), ref), kTol);
  EXPECT_THROW(be->embedding(out, device_f32(*be, table, {V, D}),
                             device_i32(*be, {3, 0, 50, 3, 17}, {5}), 1.f),
               Error);
  EXPECT_THROW(be->embedding(out, device_f32(*be, table, {V, D}),
                             device_i32(*be, {3, 0, -1, 3, 17}, {5}), 1.f),
               Error);
}

TEST(CpuGatherRows, PicksRowsInIndexOrder) {
  auto be = make_cpu_backend();
  std::mt19937 rng(5);
  auto x = test::random_vec(rng, 6 * 10);
  const std::vector<int32_t> index = {5, 0, 5, 2};
  Tensor out = be->alloc(DType::F32, {4, 10});
  be->gather_rows(out, device_f32(*be, x, {6, 10}), device_i32(*be, index, {4}));
  const auto got = to_vec(*be, out);
  for (size_t s = 0; s < index.size(); s++)
    for (int d = 0; d < 10; d++) EXPECT_EQ(got[s * 10 + size_t(d)], x[size_t(index[s] * 10 + d)]);
  EXPECT_THROW(
      be->gather_rows(out, device_f32(*be, x, {6, 10}), device_i32(*be, {0, 1, 6, 2}, {4})), Error);
}

}  // namespace cpu_linear_test
}  // namespace tandem
