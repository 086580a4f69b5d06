// Gemma 4's "proportional" RoPE (HF _compute_proportional_rope_parameters) against
// hand-derived frequencies, and what the rope op does with its zero frequencies.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "model/config.h"
#include "model/rope.h"

namespace tandem {
namespace gemma4_rope_test {

RopeConfig proportional(double partial, double theta, double factor = 1.0) {
  RopeConfig r;
  r.type = "proportional";
  r.partial_rotary_factor = partial;
  r.theta = theta;
  r.factor = factor;
  return r;
}

TEST(Gemma4Rope, ProportionalSpansTheHeadWithZeroTail) {
  // head_dim 512, 1/4 rotated: int(0.25 · 512 // 2) = 64 angles of 1e6^(-2i/512), 192 zeros.
  RopeSpec s = make_rope(proportional(0.25, 1e6), 512, 4096);
  EXPECT_EQ(s.rotary_dim, 512);
  ASSERT_EQ(s.inv_freq.size(), 256u);
  EXPECT_FLOAT_EQ(s.inv_freq[0], 1.f);
  EXPECT_NEAR(s.inv_freq[1], 0.9474635256553754, 1e-7);   // 1e6^(-2/512)
  EXPECT_NEAR(s.inv_freq[63], 0.033376246942920386, 1e-8);  // 1e6^(-126/512)
  for (size_t i = 64; i < 256; i++) EXPECT_EQ(s.inv_freq[i], 0.f) << i;
  EXPECT_FLOAT_EQ(s.attention_factor, 1.f);
}

TEST(Gemma4Rope, ExponentDividesByTheWholeHeadDim) {
  // head_dim 24, 1/4: int(6 // 2) = 3 angles; the third is 1e6^(-4/24) = 0.1 exactly.
  RopeSpec s = make_rope(proportional(0.25, 1e6), 24, 4096);
  ASSERT_EQ(s.inv_freq.size(), 12u);
  EXPECT_FLOAT_EQ(s.inv_freq[2], 0.1f);
  EXPECT_GT(s.inv_freq[2], 0.f);
  for (size_t i = 3; i < 12; i++) EXPECT_EQ(s.inv_freq[i], 0.f);
}

TEST(Gemma4Rope, FactorDividesEveryFrequency) {
  RopeSpec plain = make_rope(proportional(0.5, 1e4), 32, 4096);
  RopeSpec scaled = make_rope(proportional(0.5, 1e4, 4.0), 32, 4096);
  ASSERT_EQ(plain.inv_freq.size(), scaled.inv_freq.size());
  for (size_t i = 0; i < plain.inv_freq.size(); i++)
    EXPECT_FLOAT_EQ(scaled.inv_freq[i], plain.inv_freq[i] / 4.f);
  // head_dim 32, 1/2 rotated: int(16 // 2) = 8 angles.
  EXPECT_GT(plain.inv_freq[7], 0.f);
  EXPECT_EQ(plain.inv_freq[8], 0.f);
}

TEST(Gemma4Rope, FullProportionEqualsDefaultRope) {
  RopeConfig d;
  d.theta = 1e4;
  RopeSpec def = make_rope(d, 64, 4096);
  RopeSpec prop = make_rope(proportional(1.0, 1e4), 64, 4096);
  EXPECT_EQ(prop.rotary_dim, def.rotary_dim);
  ASSERT_EQ(prop.inv_freq.size(), def.inv_freq.size());
  for (size_t i = 0; i < def.inv_freq.size(); i++)
    EXPECT_NEAR(prop.inv_freq[i], def.inv_freq[i], 1e-7 * def.inv_freq[i]) << i;
}

TEST(Gemma4Rope, ZeroFrequencyPairsPassThroughTheOp) {
  // With head_dim 8 and 1/4 rotated, only pair (0, 4) turns; dims 1-3 and 5-7 stay.
  auto be = make_cpu_backend();
  RopeSpec s = make_rope(proportional(0.25, 1e4), 8, 4096);
  Tensor host = Tensor::empty_host(DType::F32, {1, 1, 8});
  for (int i = 0; i < 8; i++) host.ptr<float>()[i] = float(i + 1);
  Tensor x = be->upload(host, DType::F32);
  StepTensors step;
  Tensor pos = Tensor::empty_host(DType::I32, {1});
  pos.ptr<int32_t>()[0] = 3;
  step.positions = be->upload(pos, DType::I32);
  step.num_tokens = 1;
  be->rope(x, step, s);
  Tensor out = be->to_host_f32(x);
  const float* o = out.ptr<float>();
  // Pair (0, 4) at angle 3 · 1: x0' = x0 cos 3 − x4 sin 3, x4' = x4 cos 3 + x0 sin 3.
  EXPECT_NEAR(o[0], 1 * std::cos(3.0) - 5 * std::sin(3.0), 1e-5);
  EXPECT_NEAR(o[4], 5 * std::cos(3.0) + 1 * std::sin(3.0), 1e-5);
  for (int i : {1, 2, 3, 5, 6, 7}) EXPECT_EQ(o[i], float(i + 1)) << i;
}

}  // namespace gemma4_rope_test
}  // namespace tandem
