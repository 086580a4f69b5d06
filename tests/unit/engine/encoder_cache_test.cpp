// The encoder cache: each content is encoded once (also twice in one step), later steps
// read it back, and the bytes stay bounded without evicting what the current step needs.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/encoder_cache.h"

namespace tandem {
namespace encoder_cache_test {

constexpr int64_t kWidth = 4;  // soft-token width of the fake encoder

ImageInput image(int soft_tokens, uint64_t hash) {
  ImageInput im;
  im.num_soft_tokens = soft_tokens;
  im.content_hash = hash;
  return im;
}

// Encodes each image as rows filled with its hash; records each call's images.
struct FakeEncoder {
  Backend& be;
  std::vector<std::vector<uint64_t>> calls;

  Tensor operator()(std::span<const ImageInput* const> images) {
    int64_t rows = 0;
    calls.emplace_back();
    for (const ImageInput* im : images)
      rows += im->num_soft_tokens, calls.back().push_back(im->content_hash);
    Tensor host = Tensor::empty_host(DType::F32, {rows, kWidth});
    float* p = host.ptr<float>();
    for (const ImageInput* im : images)
      for (int64_t i = 0; i < im->num_soft_tokens * kWidth; i++) *p++ = float(im->content_hash);
    return be.upload(host, DType::F32);
  }
};

float first_value(Backend& be, const Tensor& t) {
  return be.to_host_f32(t).ptr<float>()[0];
}

TEST(EncoderCache, EncodesEachContentOnceAndReadsItBack) {
  auto be = make_cpu_backend();
  FakeEncoder enc{*be};
  EncoderCache cache(*be, int64_t(1) << 20);
  const ImageInput a = image(3, 11), b = image(5, 22), a_again = image(3, 11);
  const std::vector<const ImageInput*> step1{&a, &b, &a_again};
  std::vector<Tensor> got = cache.get(step1, std::ref(enc));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(enc.calls, (std::vector<std::vector<uint64_t>>{{11, 22}}));  // one batch, 11 once
  EXPECT_EQ(got[0].dim(0), 3);
  EXPECT_EQ(got[1].dim(0), 5);
  EXPECT_EQ(first_value(*be, got[1]), 22.f);
  EXPECT_EQ(first_value(*be, got[2]), 11.f);
  const std::vector<const ImageInput*> step2{&b};
  got = cache.get(step2, std::ref(enc));
  EXPECT_EQ(enc.calls.size(), 1u);  // read back, not encoded
  EXPECT_EQ(first_value(*be, got[0]), 22.f);
  EXPECT_EQ(cache.num_encoded(), 2);
}

TEST(EncoderCache, StaysWithinItsBytesAndKeepsTheCurrentStep) {
  auto be = make_cpu_backend();
  FakeEncoder enc{*be};
  const int64_t entry = 10 * kWidth * 4;  // bytes of one 10-token image
  EncoderCache cache(*be, 2 * entry);
  std::vector<ImageInput> images;
  for (uint64_t h = 1; h <= 4; h++) images.push_back(image(10, h));
  for (const ImageInput& im : images) {
    const std::vector<const ImageInput*> one{&im};
    cache.get(one, std::ref(enc));
    EXPECT_LE(cache.bytes(), 2 * entry);
  }
  EXPECT_EQ(cache.size(), 2u);  // the two most recent
  const std::vector<const ImageInput*> recent{&images[3]};
  cache.get(recent, std::ref(enc));
  EXPECT_EQ(cache.num_encoded(), 4);
  const std::vector<const ImageInput*> old{&images[0]};
  cache.get(old, std::ref(enc));
  EXPECT_EQ(cache.num_encoded(), 5);  // evicted earlier: encoded again
  // A step needing more than the bound still gets every image.
  const std::vector<const ImageInput*> all{&images[0], &images[1], &images[2], &images[3]};
  const std::vector<Tensor> got = cache.get(all, std::ref(enc));
  for (size_t i = 0; i < got.size(); i++) EXPECT_EQ(first_value(*be, got[i]), float(i + 1));
}

TEST(EncoderCache, RefusesAnEncoderThatReturnsTheWrongRows) {
  auto be = make_cpu_backend();
  EncoderCache cache(*be, 1 << 20);
  const ImageInput a = image(3, 1);
  const std::vector<const ImageInput*> one{&a};
  EXPECT_THROW(cache.get(one,
                         [&](std::span<const ImageInput* const>) {
                           return be->zeros(DType::F32, {2, 4});
                         }),
               Error);
}

}  // namespace encoder_cache_test
}  // namespace tandem
