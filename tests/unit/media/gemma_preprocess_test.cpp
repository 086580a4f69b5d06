// The processors' size rules and bookkeeping: Gemma 4's aspect-preserving size, Gemma 3's
// pan-and-scan crops, the parts and prompt text an image yields, and content_hash.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "media/content_hash.h"
#include "media/image_processor.h"
#include "media/media_error.h"
#include "media/preprocess.h"
#include "test_encoders.h"

namespace tandem {
namespace gemma_preprocess_test {

ImageProcessorConfig gemma4(int patch, int pooling, int max_soft_tokens) {
  ImageProcessorConfig c = parse_image_processor_config(
      {{"image_processor_type", "Gemma4ImageProcessor"}, {"patch_size", patch},
       {"pooling_kernel_size", pooling}, {"max_soft_tokens", max_soft_tokens}},
      {}, {}, "test");
  return c;
}

TEST(Gemma4Size, AspectPreservingSizesAsTransformersComputesThem) {
  // Expected values from transformers' get_aspect_ratio_preserving_size, evaluated in
  // Python for these inputs.
  struct Case {
    int h, w, th, tw;
  };
  const ImageProcessorConfig hub = gemma4(16, 3, 280);
  for (const Case& c : {Case{896, 896, 768, 768}, Case{1080, 1920, 576, 1056},
                        Case{3000, 4000, 672, 912}, Case{100, 5000, 96, 5664},
                        Case{50, 5000, 48, 8016}, Case{10000, 1, 13440, 48}, Case{1, 1, 768, 768},
                        Case{5000, 60, 7296, 48}}) {
    EXPECT_EQ(media_detail::gemma4_target_size(c.h, c.w, hub), std::make_pair(c.th, c.tw))
        << c.h << "x" << c.w;
  }
  const ImageProcessorConfig oracle = gemma4(4, 3, 70);
  EXPECT_EQ(media_detail::gemma4_target_size(300, 20, oracle), std::make_pair(384, 24));
  EXPECT_EQ(media_detail::gemma4_target_size(1080, 1920, oracle), std::make_pair(72, 132));
}

TEST(Gemma4Size, SoftTokensAndPositionsFollowThePatchGrid) {
  const ImageProcessorConfig c = gemma4(4, 3, 70);
  const ImageInput in = media_detail::preprocess_gemma4(test::pattern_image(20, 300, 1), c);
  // 384 x 24 -> 96 x 6 patches of 4 -> 576 patches, 64 soft tokens.
  EXPECT_EQ(in.pixels.shape, (Shape{576, 48}));
  EXPECT_EQ(in.num_soft_tokens, 64);
  ASSERT_EQ(in.position_ids.size(), 576u * 2);
  EXPECT_EQ(in.position_ids[2 * 7], 1);      // patch 7: x = 7 % 6
  EXPECT_EQ(in.position_ids[2 * 7 + 1], 1);  //          y = 7 / 6
  EXPECT_EQ(in.position_ids[2 * 575], 5);
  EXPECT_EQ(in.position_ids[2 * 575 + 1], 95);
}

TEST(Gemma4Size, PatchValuesInTheProcessorsOrder) {
  // No resize (the image is already its target size): patch (py, px) holds pixel rows
  // py*p .. py*p+p-1, each p pixels of (r, g, b), rescaled.
  ImageProcessorConfig c = gemma4(4, 3, 70);
  const RgbImage im = test::pattern_image(96, 96, 4);  // 96 = the 70-token target for a square
  ASSERT_EQ(media_detail::gemma4_target_size(96, 96, c), std::make_pair(96, 96));
  const ImageInput in = media_detail::preprocess_gemma4(im, c);
  const int pw = 24;
  for (int patch : {0, 1, 25, 575}) {
    const int py = patch / pw, px = patch % pw;
    for (int dy = 0; dy < 4; ++dy) {
      for (int dx = 0; dx < 4; ++dx) {
        for (int ch = 0; ch < 3; ++ch) {
          const float v = in.pixels.ptr<float>()[patch * 48 + (dy * 4 + dx) * 3 + ch];
          EXPECT_EQ(v, float(im.at(px * 4 + dx, py * 4 + dy)[ch] * (1 / 255.0)));
        }
      }
    }
  }
}

ImageProcessorConfig gemma3_pan_and_scan() {
  return parse_image_processor_config(
      {{"image_processor_type", "Gemma3ImageProcessor"}, {"size", {{"height", 32}, {"width", 32}}},
       {"do_pan_and_scan", true}, {"pan_and_scan_min_crop_size", 64}},
      {{"image_seq_length", 4}}, {}, "test");
}

TEST(PanAndScan, CropsOfAWideImage) {
  const ImageProcessorConfig c = gemma3_pan_and_scan();
  // 1000 x 300: round(3.33) = 3 crops of ceil(1000 / 3) = 334, the last one 332 wide.
  const RgbImage im = test::pattern_image(1000, 300, 2);
  const auto crops = media_detail::pan_and_scan_crops(im, c.pan_and_scan);
  ASSERT_EQ(crops.size(), 3u);
  EXPECT_EQ(crops[0].width, 334);
  EXPECT_EQ(crops[2].width, 332);
  EXPECT_EQ(crops[1].height, 300);
  EXPECT_EQ(crops[1].at(0, 5)[1], im.at(334, 5)[1]);
  EXPECT_EQ(crops[2].at(331, 299)[2], im.at(999, 299)[2]);
}

TEST(PanAndScan, TallImagesCropVerticallyAndLimitsApply) {
  const ImageProcessorConfig c = gemma3_pan_and_scan();
  // 100 x 1000: 10 crops by aspect, capped at 4 (max_num_crops), each 250 tall.
  const auto tall = media_detail::pan_and_scan_crops(test::pattern_image(100, 1000, 3), c.pan_and_scan);
  ASSERT_EQ(tall.size(), 4u);
  EXPECT_EQ(tall[0].height, 250);
  EXPECT_EQ(tall[0].width, 100);
  // Below the ratio (1.2): none. Crops under min_crop_size (64): none.
  EXPECT_TRUE(media_detail::pan_and_scan_crops(test::pattern_image(110, 100, 1), c.pan_and_scan).empty());
  EXPECT_TRUE(media_detail::pan_and_scan_crops(test::pattern_image(100, 40, 1), c.pan_and_scan).empty());
}

TEST(PanAndScan, PartsAndPromptText) {
  const ImageProcessor proc(gemma3_pan_and_scan(),
                            parse_image_prompt_spec({}, {}, ImageProcessorKind::kGemma3));
  const ProcessedImage img = proc.process(test::pattern_image(300, 100, 5));
  ASSERT_EQ(img.parts.size(), 4u);  // the image and 3 crops
  EXPECT_EQ(img.num_crops(), 3);
  EXPECT_EQ(img.num_soft_tokens(), 16);
  for (const auto& part : img.parts) EXPECT_EQ(part->pixels.shape, (Shape{3, 32, 32}));
  EXPECT_NE(img.parts[0]->content_hash, img.parts[1]->content_hash);
  const std::string text = proc.prompt_text(img);
  EXPECT_TRUE(text.starts_with("Here is the original image \n\n<start_of_image>"));
  size_t runs = 0;
  for (size_t at = text.find("<start_of_image>"); at != std::string::npos;
       at = text.find("<start_of_image>", at + 1)) {
    ++runs;
  }
  EXPECT_EQ(runs, 4u);
  // Without pan-and-scan the same image is one part.
  ImageProcessorConfig plain = gemma3_pan_and_scan();
  plain.pan_and_scan.enabled = false;
  EXPECT_EQ(ImageProcessor(plain, proc.prompt_spec()).process(test::pattern_image(300, 100, 5)).parts.size(), 1u);
}

TEST(Gemma4Size, ExtremeAspectThatFitsNoPatchIsInvalid) {
  // Both sides round to 0 patches only for a budget smaller than one pooled cell: not
  // reachable with the supported budgets, so force it with a hand-made config.
  ImageProcessorConfig c = gemma4(16, 3, 70);
  c.max_soft_tokens = 0;
  try {
    media_detail::gemma4_target_size(100, 100, c);
    FAIL();
  } catch (const MediaError& e) {
    EXPECT_EQ(e.kind(), MediaErrorKind::kInvalid);
  }
}

TEST(ContentHash, SipHashReferenceVector) {
  // SipHash-2-4 paper, appendix A: key 00..0f, message 00..0e -> a129ca6149be45e5.
  const SipKey key = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  uint8_t msg[15];
  for (int i = 0; i < 15; ++i) msg[i] = uint8_t(i);
  EXPECT_EQ(siphash24(key, msg, 15), 0xa129ca6149be45e5ull);
  EXPECT_EQ(siphash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
}

TEST(ContentHash, PixelsAndSizeNotTheFile) {
  const RgbImage im = test::pattern_image(12, 8, 9);
  const uint64_t h = content_hash(im);
  EXPECT_EQ(content_hash(im), h);
  RgbImage changed = im;
  changed.pixels[100] ^= 1;
  EXPECT_NE(content_hash(changed), h);
  RgbImage reshaped = im;  // same bytes, other size
  reshaped.width = 8, reshaped.height = 12;
  EXPECT_NE(content_hash(reshaped), h);
  EXPECT_NE(content_hash(im, SipKey{1, 2}), content_hash(im, SipKey{1, 3}));
  // The same pixels from a PNG and from a lossless WebP: one key.
  const ImageProcessor proc(gemma4(4, 3, 70), parse_image_prompt_spec({}, {}, ImageProcessorKind::kGemma4));
  const auto png = proc.process(test::encode_png_rgb(im), MediaLimits{});
  const auto webp = proc.process(test::encode_webp(im.pixels, 12, 8, 3, true), MediaLimits{});
  EXPECT_EQ(png.parts[0]->content_hash, h);
  EXPECT_EQ(webp.parts[0]->content_hash, h);
  EXPECT_EQ(webp.format, ImageFormat::kWebP);
}

}  // namespace gemma_preprocess_test
}  // namespace tandem
