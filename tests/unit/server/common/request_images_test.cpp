// A request's images on their way into the prompt (common/request_images.h, image_source.h):
// refusals before anything is read (a model without images, too many images), every hostile
// or broken image a 400 naming its message part, the marker expansion's checks, and the
// span check that turns a mismatch into an internal error rather than a shifted image.
#include <gtest/gtest.h>

#include "../expect_400.h"
#include "../test_images.h"
#include "server/common/request_images.h"

namespace tandem::server {
namespace request_images_test {

using namespace testing;

class RequestImages : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = Tokenizer::load(gemma3_vision_dir());
    served_ = load_served_images(gemma3_vision_dir(), *tokenizer_, true, "");
    ASSERT_TRUE(served_.takes_images);
  }
  ImagePart part(const Bytes& bytes, size_t i = 0) const {
    ImagePart p;
    p.path = "messages[0].content[" + std::to_string(i) + "]";
    p.payload = base64::encode(bytes);
    return p;
  }
  // The 400's message for one image, checking it names the part.
  std::string refusal(const ImagePart& p, const MediaLimits& limits = {}) const {
    try {
      process_request_images(served_, std::vector<ImagePart>{p}, limits, {});
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), p.path);
      EXPECT_EQ(std::string(e.what()).rfind(p.path + ": ", 0), 0u) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no refusal";
    return "";
  }
  std::shared_ptr<const Tokenizer> tokenizer_;
  ServedImages served_;
};

TEST_F(RequestImages, PreprocessesEachImage) {
  std::vector<ImagePart> parts = {part(test_png(64, 64), 0), part(test_png(100, 30, 2), 1)};
  std::vector<ProcessedImage> images = process_request_images(served_, parts, {}, {});
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[1].width, 100);
  EXPECT_EQ(images[1].num_soft_tokens(), 16);  // the oracle's image_seq_length
  EXPECT_NE(images[0].parts[0]->content_hash, images[1].parts[0]->content_hash);
}

TEST_F(RequestImages, RefusedBeforeReadingWhenTheModelTakesNone) {
  ServedImages text_only = served_;
  text_only.takes_images = false;
  text_only.refusal = "this model takes text only";
  ImagePart p = part(test_png(8, 8));
  p.path = "messages[2].content[1]";
  expect_400([&] { process_request_images(text_only, std::vector<ImagePart>{p}, {}, {}); },
             "messages[2].content[1]");
  try {
    process_request_images(text_only, std::vector<ImagePart>{p}, {}, {});
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("takes text only"), std::string::npos) << e.what();
  }
}

TEST_F(RequestImages, TooManyImagesNamesTheFirstOneOver) {
  MediaLimits limits;
  limits.max_images_per_request = 2;
  Bytes png = test_png(8, 8);
  std::vector<ImagePart> parts = {part(png, 0), part(png, 1), part(png, 2)};
  expect_400([&] { process_request_images(served_, parts, limits, {}); }, "messages[0].content[2]");
}

TEST_F(RequestImages, HostileAndBrokenImagesAre400s) {
  Bytes png = test_png(32, 32);
  Bytes truncated(png.begin(), png.begin() + long(png.size() / 2));
  EXPECT_NE(refusal(part(truncated)).find("PNG image is corrupt"), std::string::npos);
  Bytes corrupt = png;
  for (size_t i = 40; i < corrupt.size() - 12; i += 7) corrupt[i] ^= 0x5a;
  EXPECT_NE(refusal(part(corrupt)).find("corrupt"), std::string::npos);
  EXPECT_NE(refusal(part(Bytes{'B', 'M', 0, 0, 0, 0, 0, 0})).find("BMP"), std::string::npos);
  EXPECT_NE(refusal(part(Bytes{'h', 'e', 'l', 'l', 'o'})).find("not a known image format"),
            std::string::npos);
  EXPECT_NE(refusal(part(Bytes{})).find("empty"), std::string::npos);
  // A bomb's header (30000 x 30000 in a few hundred bytes) is refused before decoding.
  EXPECT_NE(refusal(part(png_declaring(30000, 30000))).find("--max-image-pixels"),
            std::string::npos);
  MediaLimits small;
  small.max_image_bytes = 100;
  EXPECT_NE(refusal(part(png), small).find("--max-image-bytes"), std::string::npos);
  small = {};
  small.max_image_pixels = 500;
  EXPECT_NE(refusal(part(png), small).find("--max-image-pixels"), std::string::npos);
  ImagePart bad_base64 = part(png);
  bad_base64.payload.insert(10, "\n");
  EXPECT_NE(refusal(bad_base64).find("not valid base64"), std::string::npos);
}

TEST_F(RequestImages, MarkersAreExpandedInOrderAndChecked) {
  const ImageProcessor& proc = *served_.processor;
  std::vector<ProcessedImage> two = process_request_images(
      served_, std::vector<ImagePart>{part(test_png(8, 8)), part(test_png(9, 9, 3))}, {}, {});
  std::string rendered = "<bos>a<start_of_image>b<start_of_image>c";
  std::string expanded = expand_image_markers(rendered, proc, two, "messages");
  EXPECT_EQ(expanded, "<bos>a" + proc.prompt_text(two[0]) + "b" + proc.prompt_text(two[1]) + "c");
  std::vector<int32_t> ids = tokenizer_->encode(expanded, false);
  std::vector<MediaSpan> spans = image_spans(ids, served_.soft_token_id, two);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_LT(spans[0].start + spans[0].length, spans[1].start);
  EXPECT_EQ(spans[1].image, two[1].parts[0]);
  // A template that dropped an image, or a marker typed into the text: 400s.
  expect_400([&] { expand_image_markers("<bos>a<start_of_image>", proc, two, "messages"); },
             "messages");
  expect_400([&] { expand_image_markers(rendered + "<start_of_image>", proc, two, "messages"); },
             "messages");
  // The placeholder's own text, outside an image (also with no image at all).
  expect_400([&] { expand_image_markers("<bos><image_soft_token>", proc, {}, "messages"); },
             "messages");
  EXPECT_EQ(expand_image_markers("<bos>plain", proc, {}, "messages"), "<bos>plain");
}

// A message's own text (a plain span) that spells the marker stays text and is not counted;
// the spans after an expansion move with it.
TEST_F(RequestImages, MarkersInAMessagesTextStayText) {
  const ImageProcessor& proc = *served_.processor;
  std::vector<ProcessedImage> one =
      process_request_images(served_, std::vector<ImagePart>{part(test_png(8, 8))}, {}, {});
  const std::string typed = "say <start_of_image>";
  RenderedPrompt r{"<bos><start_of_image>" + typed + "!", {}};
  const size_t typed_at = r.text.find(typed);
  r.plain.push_back({typed_at, typed_at + typed.size()});
  expand_image_markers(r, proc, one, "messages");
  EXPECT_EQ(r.text, "<bos>" + proc.prompt_text(one[0]) + typed + "!");
  ASSERT_EQ(r.plain.size(), 1u);
  EXPECT_EQ(r.text.substr(r.plain[0].begin, r.plain[0].end - r.plain[0].begin), typed);
  // Without the image, the template's own marker is the only one counted: one too many.
  RenderedPrompt none{"<bos><start_of_image>", {}};
  expect_400([&] { expand_image_markers(none, proc, {}, "messages"); }, "messages");
}

TEST_F(RequestImages, ASpanMismatchIsAnInternalError) {
  std::vector<ProcessedImage> one =
      process_request_images(served_, std::vector<ImagePart>{part(test_png(8, 8))}, {}, {});
  const int32_t soft = served_.soft_token_id;
  std::vector<int32_t> short_run = {2, soft, soft, 3};  // 2 placeholders for 16 soft tokens
  try {
    image_spans(short_run, soft, one);
    ADD_FAILURE() << "a short run was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 500);
  }
  std::vector<int32_t> no_run = {2, 3};
  EXPECT_THROW(image_spans(no_run, soft, one), ApiError);
  std::vector<int32_t> extra(40, soft);  // one run of 40: no image has 40
  EXPECT_THROW(image_spans(extra, soft, one), ApiError);
}

}  // namespace request_images_test
}  // namespace tandem::server
