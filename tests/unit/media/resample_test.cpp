// Pillow's resampling: the taps and fixed-point weights on hand-computed cases, and whole
// resizes against a plain double-precision reference of the same separable algorithm
// (kernels from their formulas, no fixed point, rounding to 8 bits between the passes):
// equal where the weights are exact in 22-bit fixed point, within one level elsewhere.
#include "media/resample.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_encoders.h"

namespace tandem {
namespace resample_test {

// The kernels from their definitions (Pillow's formulas, written independently).
double kernel(ResampleFilter f, double x) {
  const double ax = std::fabs(x);
  auto sinc = [](double v) { return v == 0 ? 1.0 : std::sin(M_PI * v) / (M_PI * v); };
  switch (f) {
    case ResampleFilter::kBox: return x > -0.5 && x <= 0.5 ? 1 : 0;
    case ResampleFilter::kBilinear: return ax < 1 ? 1 - ax : 0;
    case ResampleFilter::kHamming:
      return ax >= 1 ? 0 : sinc(ax) * (0.54 + 0.46 * std::cos(M_PI * ax));
    case ResampleFilter::kBicubic:
      return ax < 1 ? 1.5 * ax * ax * ax - 2.5 * ax * ax + 1
             : ax < 2 ? -0.5 * ax * ax * ax + 2.5 * ax * ax - 4 * ax + 2
                      : 0;
    case ResampleFilter::kLanczos: return ax < 3 ? sinc(x) * sinc(x / 3) : 0;
    default: return 0;
  }
}

uint8_t round8(double v) { return uint8_t(std::clamp(std::floor(v + 0.5), 0.0, 255.0)); }

// One axis: out[i] = sum_j w_ij in[j] over Pillow's window of taps, [center - support,
// center + support) rounded to whole pixels (which decides, at exact ties, whether a pixel
// on the box filter's edge is in).
std::vector<std::vector<double>> reference_weights(int in, int out, ResampleFilter f) {
  const double scale = double(in) / out, fs = std::max(scale, 1.0);
  const double support = (f == ResampleFilter::kBox       ? 0.5
                          : f == ResampleFilter::kBicubic ? 2.0
                          : f == ResampleFilter::kLanczos ? 3.0
                                                          : 1.0) * fs;
  std::vector<std::vector<double>> w(static_cast<size_t>(out),
                                     std::vector<double>(static_cast<size_t>(in)));
  for (int i = 0; i < out; ++i) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(0, int(center - support + 0.5));
    const int hi = std::min(in, int(center + support + 0.5));
    double sum = 0;
    // The argument in Pillow's order of operations, for the same reason.
    for (int j = lo; j < hi; ++j) sum += w[size_t(i)][size_t(j)] = kernel(f, (j - center + 0.5) * (1.0 / fs));
    for (int j = 0; j < in; ++j) w[size_t(i)][size_t(j)] /= sum;
  }
  return w;
}

RgbImage reference_resize(const RgbImage& in, int width, int height, ResampleFilter f) {
  RgbImage mid = in;
  if (width != in.width) {
    const auto w = reference_weights(in.width, width, f);
    mid = RgbImage(width, in.height);
    for (int y = 0; y < in.height; ++y)
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < 3; ++c) {
          double v = 0;
          for (int j = 0; j < in.width; ++j) v += w[size_t(x)][size_t(j)] * in.at(j, y)[c];
          mid.row(y)[3 * x + c] = round8(v);
        }
  }
  if (height == in.height) return mid;
  const auto w = reference_weights(in.height, height, f);
  RgbImage out(width, height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        double v = 0;
        for (int j = 0; j < in.height; ++j) v += w[size_t(y)][size_t(j)] * mid.at(x, j)[c];
        out.row(y)[3 * x + c] = round8(v);
      }
  return out;
}

struct Diff {
  int max = 0;
  double fraction_differing = 0;
};
Diff compare(const RgbImage& a, const RgbImage& b) {
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  Diff d;
  size_t differing = 0;
  for (size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i) {
    const int e = std::abs(int(a.pixels[i]) - int(b.pixels[i]));
    d.max = std::max(d.max, e);
    differing += e != 0;
  }
  d.fraction_differing = double(differing) / double(a.pixels.size());
  return d;
}

TEST(Resample, TapsOfABilinearHalving) {
  const ResampleTaps t = resample_taps(4, 2, ResampleFilter::kBilinear);
  EXPECT_EQ(t.ksize, 5);  // support 1 widened by the factor 2: ceil(2) * 2 + 1
  EXPECT_EQ(t.first, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.count, (std::vector<int>{3, 3}));
  const double expected[2][3] = {{3 / 7.0, 3 / 7.0, 1 / 7.0}, {1 / 7.0, 3 / 7.0, 3 / 7.0}};
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(t.weights[size_t(i * 5 + k)], expected[i][k], 1e-15);
  EXPECT_EQ(t.weights[3], 0.0);  // unused taps stay zero
}

TEST(Resample, FixedPointRoundsHalfAwayFromZero) {
  const double u = 1.0 / (1 << 22);
  EXPECT_EQ(fixed_point_weights({0.5, -0.25, 2.5 * u, -2.5 * u, 0.4 * u, -0.4 * u}),
            (std::vector<int32_t>{1 << 21, -(1 << 20), 3, -3, 0, 0}));
}

TEST(Resample, ExactWhereTheWeightsAre) {
  const RgbImage src = test::pattern_image(16, 12, 21);
  // 2x bilinear upscale: weights 3/4 and 1/4; 2x box downscale: 1/2 and 1/2.
  EXPECT_EQ(compare(resize_like_pil(src, 32, 24, ResampleFilter::kBilinear),
                    reference_resize(src, 32, 24, ResampleFilter::kBilinear)).max, 0);
  EXPECT_EQ(compare(resize_like_pil(src, 8, 6, ResampleFilter::kBox),
                    reference_resize(src, 8, 6, ResampleFilter::kBox)).max, 0);
  EXPECT_EQ(resize_like_pil(src, 16, 12, ResampleFilter::kBicubic).pixels, src.pixels);
}

struct Case {
  int in_w, in_h, out_w, out_h;
};

TEST(Resample, EveryFilterWithinOneLevelOfTheReference) {
  const Case cases[] = {
      {97, 61, 40, 23},  // down
      {13, 9, 50, 37},   // up
      {120, 20, 30, 50}, // wide: down in x, up in y
      {20, 150, 60, 45}, // tall: up in x, down in y
      {1, 1, 5, 3},      {5, 3, 1, 1},  {64, 64, 64, 17},  {33, 7, 8, 7},
  };
  for (ResampleFilter f : {ResampleFilter::kBox, ResampleFilter::kBilinear, ResampleFilter::kHamming,
                           ResampleFilter::kBicubic, ResampleFilter::kLanczos}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(resample_filter_name(f)) + " " + std::to_string(c.in_w) + "x" +
                   std::to_string(c.in_h) + " -> " + std::to_string(c.out_w) + "x" + std::to_string(c.out_h));
      const RgbImage src = test::pattern_image(c.in_w, c.in_h, uint32_t(c.in_w * 31 + c.out_h));
      const Diff d = compare(resize_like_pil(src, c.out_w, c.out_h, f),
                             reference_resize(src, c.out_w, c.out_h, f));
      EXPECT_LE(d.max, 1);
      // Off by one where a value sits at a rounding edge: the fixed-point weights are each
      // rounded, and a changed intermediate level propagates through the second pass.
      EXPECT_LE(d.fraction_differing, 0.05);
    }
  }
}

TEST(Resample, NearestPicksTheSourceUnderEachCenter) {
  const RgbImage src = test::pattern_image(7, 10, 3);
  // Sizes where no center falls exactly on a pixel edge (see the next test for one that does).
  for (const Case& c : {Case{7, 10, 3, 4}, Case{7, 10, 14, 24}, Case{7, 10, 7, 1}, Case{7, 10, 1, 10}}) {
    const RgbImage out = resize_like_pil(src, c.out_w, c.out_h, ResampleFilter::kNearest);
    for (int y = 0; y < c.out_h; ++y) {
      for (int x = 0; x < c.out_w; ++x) {
        const int sx = int(std::floor((x + 0.5) * c.in_w / c.out_w));
        const int sy = int(std::floor((y + 0.5) * c.in_h / c.out_h));
        for (int ch = 0; ch < 3; ++ch) ASSERT_EQ(out.at(x, y)[ch], src.at(sx, sy)[ch]);
      }
    }
  }
}

TEST(Resample, NearestAccumulatesItsPositionsAsPil) {
  // 10 -> 25 rows: row 7's center is 7.5 * 0.4 = 3 exactly, but PIL adds 0.4 to 0.2 seven
  // times (2.9999999999999996) and takes source row 2.
  RgbImage src(1, 10);
  for (int y = 0; y < 10; ++y) src.row(y)[0] = uint8_t(y);
  const RgbImage out = resize_like_pil(src, 1, 25, ResampleFilter::kNearest);
  EXPECT_EQ(out.at(0, 7)[0], 2);
  EXPECT_EQ(out.at(0, 8)[0], 3);
}

TEST(Resample, VeryTallImagesShrinkVerticallyFirst) {
  // Pillow >= 12.2: height > 100 x width and shrinking in height -> two one-axis resizes.
  const RgbImage src = test::pattern_image(3, 400, 5);
  const RgbImage direct = resize_like_pil(src, 2, 100, ResampleFilter::kBicubic);
  const RgbImage two_steps = resize_like_pil(resize_like_pil(src, 3, 100, ResampleFilter::kBicubic),
                                             2, 100, ResampleFilter::kBicubic);
  EXPECT_EQ(direct.pixels, two_steps.pixels);
  const RgbImage reference = reference_resize(
      reference_resize(src, 3, 100, ResampleFilter::kBicubic), 2, 100, ResampleFilter::kBicubic);
  EXPECT_LE(compare(direct, reference).max, 1);
}

TEST(Resample, FilterNumbersArePils) {
  EXPECT_EQ(resample_filter_from_pil(2), ResampleFilter::kBilinear);
  EXPECT_EQ(resample_filter_from_pil(3), ResampleFilter::kBicubic);
  EXPECT_EQ(resample_filter_from_pil(1), ResampleFilter::kLanczos);
  EXPECT_EQ(resample_filter_from_pil(6), std::nullopt);
}

}  // namespace resample_test
}  // namespace tandem
