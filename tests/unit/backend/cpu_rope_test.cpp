// RoPE against a naive double loop, plus hand-derived facts: position 0 is the identity,
// a unit vector comes back rotated by exactly position * inv_freq, pass-through dims are
// untouched, and dynamic NTK switches on only past the original context, per row.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"
#include "step_builder.h"

namespace tandem {
namespace cpu_rope_test {

using test::device_f32;
using test::kTol;
using test::rel_err;
using test::RowSpec;
using test::to_vec;

// inv_freq[i] = 1 / base^(2i / rotary_dim), computed in double then rounded, as a config
// layer would.
std::vector<float> default_inv_freq(int rotary_dim, double base) {
  std::vector<float> f(size_t(rotary_dim / 2));
  for (int i = 0; i < rotary_dim / 2; i++)
    f[size_t(i)] = float(1.0 / std::pow(base, 2.0 * i / rotary_dim));
  return f;
}

RopeSpec make_spec(int rotary_dim, float attention_factor = 1.f) {
  RopeSpec s;
  s.rotary_dim = rotary_dim;
  s.inv_freq = default_inv_freq(rotary_dim, 10000.0);
  s.attention_factor = attention_factor;
  return s;
}

// HF rotate_half. The angle is HF's f32 product (float(pos) * inv_freq); the rest in double.
std::vector<double> rope_ref(const std::vector<float>& x, const std::vector<int32_t>& pos, int H,
                             int Dh, int rotary_dim, const std::vector<std::vector<float>>& freq,
                             double factor) {
  std::vector<double> out(x.begin(), x.end());
  const int half = rotary_dim / 2;
  for (size_t t = 0; t < pos.size(); t++)
    for (int h = 0; h < H; h++)
      for (int i = 0; i < half; i++) {
        const double angle = float(pos[t]) * freq[t][size_t(i)];
        const double c = std::cos(angle) * factor, s = std::sin(angle) * factor;
        const size_t base = (t * size_t(H) + size_t(h)) * size_t(Dh);
        const double x1 = x[base + size_t(i)], x2 = x[base + size_t(i + half)];
        out[base + size_t(i)] = x1 * c - x2 * s;
        out[base + size_t(i + half)] = x2 * c + x1 * s;
      }
  return out;
}

// One row per position list, each with enough blocks (rope reads no blocks).
StepTensors positions_step(Backend& be, const std::vector<std::vector<int32_t>>& rows) {
  std::vector<RowSpec> specs;
  for (const auto& p : rows) specs.push_back({p, std::vector<int32_t>(64, 0)});
  return test::build_step(be, specs);
}

struct RopeCase {
  int H, Dh, rotary_dim;
  float factor;
};

TEST(CpuRope, MatchesNaiveIncludingPartialRotary) {
  auto be = make_cpu_backend();
  // A decode row at 40 beside a prefill row 0..6, and a chunk at 90..94.
  const std::vector<std::vector<int32_t>> rows = {
      {40}, {0, 1, 2, 3, 4, 5, 6}, {90, 91, 92, 93, 94}};
  for (uint32_t seed : test::test_seeds()) {
    SCOPED_TRACE(test::seed_trace(seed));
    std::mt19937 rng(seed);
    for (RopeCase c : {RopeCase{1, 16, 16, 1.f},
                       {4, 24, 24, 1.f},
                       {2, 64, 64, 1.3f},
                       {3, 64, 32, 1.f},
                       {2, 24, 8, 1.f},
                       {2, 256, 64, 1.f}}) {
      SCOPED_TRACE(testing::Message() << "H=" << c.H << " Dh=" << c.Dh << " rd=" << c.rotary_dim);
      StepTensors step = positions_step(*be, rows);
      const int T = step.num_tokens;
      auto x = test::random_vec(rng, size_t(T * c.H * c.Dh));
      Tensor xd = device_f32(*be, x, {T, c.H, c.Dh});
      const RopeSpec spec = make_spec(c.rotary_dim, c.factor);
      be->rope(xd, step, spec);
      const auto got = to_vec(*be, xd);
      std::vector<int32_t> pos;
      for (const auto& r : rows) pos.insert(pos.end(), r.begin(), r.end());
      const std::vector<std::vector<float>> freq(size_t(T), spec.inv_freq);
      EXPECT_LE(rel_err(got, rope_ref(x, pos, c.H, c.Dh, c.rotary_dim, freq, c.factor)), kTol);
      for (int t = 0; t < T; t++)  // dims past rotary_dim pass through bit for bit
        for (int h = 0; h < c.H; h++)
          for (int d = c.rotary_dim; d < c.Dh; d++) {
            const size_t i = size_t((t * c.H + h) * c.Dh + d);
            ASSERT_EQ(got[i], x[i]);
          }
    }
  }
}

TEST(CpuRope, PositionZeroIsIdentity) {
  auto be = make_cpu_backend();
  std::mt19937 rng(4);
  auto x = test::random_vec(rng, 3 * 2 * 32);
  Tensor xd = device_f32(*be, x, {3, 2, 32});
  be->rope(xd, positions_step(*be, {{0}, {0}, {0}}), make_spec(32));
  EXPECT_EQ(to_vec(*be, xd), x);
}

// A head with x[i] = 1, x[i + half] = 0 comes back as (cos θ, sin θ), θ = p * inv_freq[i]:
// read the angle back with atan2 and compare modulo 2π.
TEST(CpuRope, UnitVectorRotatesByPositionTimesFrequency) {
  auto be = make_cpu_backend();
  const int Dh = 16, half = 8;
  const RopeSpec spec = make_spec(Dh);
  for (int32_t p : {1, 5, 40, 1000}) {
    for (int i = 0; i < half; i++) {
      std::vector<float> x(size_t(Dh), 0.f);
      x[size_t(i)] = 1.f;
      Tensor xd = device_f32(*be, x, {1, 1, Dh});
      be->rope(xd, positions_step(*be, {{p}}), spec);
      const auto y = to_vec(*be, xd);
      const double expect = std::remainder(double(p) * spec.inv_freq[size_t(i)], 2 * M_PI);
      const double got = std::atan2(y[size_t(i + half)], y[size_t(i)]);
      EXPECT_NEAR(std::remainder(got - expect, 2 * M_PI), 0.0, 1e-4) << "p=" << p << " i=" << i;
      EXPECT_NEAR(std::hypot(y[size_t(i)], y[size_t(i + half)]), 1.0, 1e-6);
    }
  }
}

// HF dynamic NTK inv_freq for length L, in double.
std::vector<float> ntk_inv_freq(int rotary_dim, double base, double factor, int original, int L) {
  const double scaled =
      base * std::pow(factor * L / original - (factor - 1), double(rotary_dim) / (rotary_dim - 2));
  return default_inv_freq(rotary_dim, scaled);
}

// Row A ends at position 31 (L = 32 = original): untouched frequencies, bit-identical to
// plain RoPE. Row B reaches 32 (L = 33) and row C is a decode token at 40 (L = 41): each
// uses its own rescaled frequencies.
TEST(CpuRope, DynamicNtkSwitchesOnPastOriginalContextPerRow) {
  auto be = make_cpu_backend();
  const int H = 2, Dh = 32, original = 32;
  const double factor = 2.0;
  RopeSpec plain = make_spec(Dh);
  RopeSpec dyn = plain;
  dyn.dynamic_factor = float(factor);
  dyn.original_max_position = original;
  dyn.base = 10000.f;
  const std::vector<std::vector<int32_t>> rows = {{29, 30, 31}, {30, 31, 32}, {40}};
  StepTensors step = positions_step(*be, rows);
  std::mt19937 rng(8);
  auto x = test::random_vec(rng, size_t(7 * H * Dh));
  Tensor xp = device_f32(*be, x, {7, H, Dh}), xd = device_f32(*be, x, {7, H, Dh});
  be->rope(xp, step, plain);
  be->rope(xd, step, dyn);
  const auto gp = to_vec(*be, xp), gd = to_vec(*be, xd);
  const size_t row_a = size_t(3 * H * Dh);
  EXPECT_EQ(std::vector<float>(gd.begin(), gd.begin() + long(row_a)),
            std::vector<float>(gp.begin(), gp.begin() + long(row_a)));

  std::vector<std::vector<float>> freq(7, plain.inv_freq);
  for (int t = 3; t < 6; t++) freq[size_t(t)] = ntk_inv_freq(Dh, 10000.0, factor, original, 33);
  freq[6] = ntk_inv_freq(Dh, 10000.0, factor, original, 41);
  const std::vector<int32_t> pos = {29, 30, 31, 30, 31, 32, 40};
  EXPECT_LE(rel_err(gd, rope_ref(x, pos, H, Dh, Dh, freq, 1.0)), kTol);
  // ... and the rescaled rows really differ from plain RoPE.
  EXPECT_GT(rel_err(std::vector<float>(gd.begin() + long(row_a), gd.end()),
                    std::vector<float>(gp.begin() + long(row_a), gp.end())),
            1e-4);
}

TEST(CpuRope, RejectsBadSpecs) {
  auto be = make_cpu_backend();
  Tensor x = be->zeros(DType::F32, {1, 2, 16});
  StepTensors step = positions_step(*be, {{3}});
  RopeSpec odd = make_spec(16);
  odd.rotary_dim = 15;
  EXPECT_THROW(be->rope(x, step, odd), Error);
  RopeSpec wide = make_spec(32);
  EXPECT_THROW(be->rope(x, step, wide), Error);
  RopeSpec short_freq = make_spec(16);
  short_freq.inv_freq.pop_back();
  EXPECT_THROW(be->rope(x, step, short_freq), Error);
  Tensor wrong_t = be->zeros(DType::F32, {2, 2, 16});
  EXPECT_THROW(be->rope(wrong_t, step, make_spec(16)), Error);
}

}  // namespace cpu_rope_test
}  // namespace tandem
