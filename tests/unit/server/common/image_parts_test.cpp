// Image parts as each API spells them (common/image_parts.h) and the content they make for
// the chat template (common/content_parts.h, and the three conversation readers): data: URLs,
// http(s) and file: URLs told apart, malformed ones and other media types refused naming the
// field, images only in user turns, text-only content unchanged.
#include <gtest/gtest.h>

#include "../expect_400.h"
#include "server/anthropic/anthropic_messages.h"
#include "server/common/content_parts.h"
#include "server/common/image_parts.h"
#include "server/openai/chat_messages.h"
#include "server/openai/responses_request.h"

namespace tandem::server {
namespace image_parts_test {

Json openai_image(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

TEST(ImageParts, DataUrlsKeepTheirBase64AndMediaType) {
  ImagePart p = image_part_from_url("data:image/PNG;base64,iVBORw0KGgo=", "m[0].c[1]", "f");
  EXPECT_EQ(p.source, ImageSource::kData);
  EXPECT_EQ(p.media_type, "image/png");
  EXPECT_EQ(p.payload, "iVBORw0KGgo=");
  EXPECT_EQ(p.path, "m[0].c[1]");
  // No media type: what the bytes are decides; parameters before ;base64 are allowed.
  EXPECT_EQ(image_part_from_url("data:;base64,AAAA", "p", "f").media_type, "");
  EXPECT_EQ(image_part_from_url("DATA:image/jpeg;name=x.jpg;base64,AAAA", "p", "f").media_type,
            "image/jpeg");
  for (const char* type : {"image/jpeg", "image/jpg", "image/webp", "image/gif"})
    EXPECT_TRUE(is_supported_image_type(type)) << type;
}

TEST(ImageParts, BadDataUrlsAre400sNamingTheField) {
  expect_400([] { image_part_from_url("data:image/png;base64", "p", "f.url"); }, "f.url");
  expect_400([] { image_part_from_url("data:image/png,rawbytes", "p", "f.url"); }, "f.url");
  expect_400([] { image_part_from_url("data:text/plain;base64,AAAA", "p", "f.url"); }, "f.url");
  expect_400([] { image_part_from_url("data:image/bmp;base64,AAAA", "p", "f.url"); }, "f.url");
  expect_400([] { image_part_from_url("data:image/svg+xml;base64,AAAA", "p", "f.url"); }, "f.url");
  expect_400([] { image_part_from_url("ftp://example.com/a.png", "p", "f.url"); }, "f.url");
  expect_400([] { image_part_from_url("just-a-name.png", "p", "f.url"); }, "f.url");
}

TEST(ImageParts, UrlSchemesAreToldApart) {
  EXPECT_EQ(image_part_from_url("https://example.com/a.png", "p", "f").source, ImageSource::kHttp);
  EXPECT_EQ(image_part_from_url("HTTP://example.com/a.png", "p", "f").source, ImageSource::kHttp);
  ImagePart file = image_part_from_url("file:///srv/images/a.png", "p", "f");
  EXPECT_EQ(file.source, ImageSource::kFile);
  EXPECT_EQ(file.payload, "file:///srv/images/a.png");
}

TEST(ImageParts, EachApisShape) {
  Json bare = {{"type", "image_url"}, {"image_url", "data:image/png;base64,AAAA"}};
  EXPECT_EQ(read_openai_image_part(bare, "p").payload, "AAAA");
  Json detailed = {{"type", "image_url"},
                   {"image_url", {{"url", "data:image/gif;base64,R0lG"}, {"detail", "low"}}}};
  EXPECT_EQ(read_openai_image_part(detailed, "p").media_type, "image/gif");
  Json bad_detail = {{"type", "image_url"},
                     {"image_url", {{"url", "data:;base64,AA"}, {"detail", "max"}}}};
  expect_400([&] { read_openai_image_part(bad_detail, "p"); }, "p.image_url.detail");
  expect_400([] { read_openai_image_part({{"type", "image_url"}}, "p"); }, "p.image_url");

  Json input_image = {{"type", "input_image"}, {"image_url", "https://example.com/x.png"}};
  EXPECT_EQ(read_responses_image_part(input_image, "p").source, ImageSource::kHttp);
  expect_400(
      [] {
        read_responses_image_part({{"type", "input_image"}, {"file_id", "file-1"}}, "p");
      },
      "p.file_id");

  Json anthropic = {
      {"type", "image"},
      {"source", {{"type", "base64"}, {"media_type", "image/webp"}, {"data", "UklG"}}}};
  ImagePart a = read_anthropic_image_block(anthropic, "messages[0].content[0]");
  EXPECT_EQ(a.source, ImageSource::kData);
  EXPECT_EQ(a.media_type, "image/webp");
  EXPECT_EQ(a.payload, "UklG");
  Json by_url = {{"type", "image"},
                 {"source", {{"type", "url"}, {"url", "https://a.example/x.jpg"}}}};
  EXPECT_EQ(read_anthropic_image_block(by_url, "p").source, ImageSource::kHttp);
  Json pdf = anthropic;
  pdf["source"]["media_type"] = "application/pdf";
  expect_400([&] { read_anthropic_image_block(pdf, "p"); }, "p.source.media_type");
  Json file = {{"type", "image"}, {"source", {{"type", "file"}, {"file_id", "f"}}}};
  expect_400([&] { read_anthropic_image_block(file, "p"); }, "p.source.type");
}

TEST(ContentParts, ImagesBecomeTemplateItemsInOrder) {
  Json messages = Json::array({{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"},
                                {"content", Json::array({openai_image("data:image/png;base64,AAAA"),
                                                         {{"type", "text"}, {"text", "and"}},
                                                         openai_image("file:///x/b.png")})}},
                               {{"role", "assistant"}, {"content", "Two."}},
                               {{"role", "user"},
                                {"content", Json::array({{{"type", "text"}, {"text", "a"}},
                                                         {{"type", "text"}, {"text", "b"}}})}}});
  std::vector<ImagePart> images;
  Json out = normalize_openai_messages(messages, {}, {.images = &images});
  EXPECT_EQ(out[1]["content"], Json::parse(R"([{"type": "image"}, {"type": "text", "text": "and"},
                                               {"type": "image"}])"));
  EXPECT_EQ(out[0]["content"], "Be brief.");
  EXPECT_EQ(out[3]["content"], "a\nb");  // text only: joined, as before
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].path, "messages[1].content[0]");
  EXPECT_EQ(images[1].path, "messages[1].content[2]");
  EXPECT_EQ(images[1].source, ImageSource::kFile);
}

TEST(ContentParts, ImagesOnlyInUserTurns) {
  std::vector<ImagePart> images;
  Json in_system = Json::array(
      {{{"role", "system"}, {"content", Json::array({openai_image("data:;base64,AA")})}},
       {{"role", "user"}, {"content", "hi"}}});
  expect_400([&] { normalize_openai_messages(in_system, {}, {.images = &images}); },
             "messages[0].content[0].type");
  // Without a place for images (a text-only reader), image parts stay refused.
  Json in_user = Json::array(
      {{{"role", "user"}, {"content", Json::array({openai_image("data:;base64,AA")})}}});
  expect_400([&] { normalize_openai_messages(in_user); }, "messages[0].content[0].type");
  expect_400(
      [&] {
        normalize_openai_messages(
            Json::array(
                {{{"role", "user"}, {"content", Json::array({{{"type", "input_audio"}}})}}}),
            {}, {.images = &images});
      },
      "messages[0].content[0].type");
}

TEST(ContentParts, AnthropicImageBlocks) {
  Json messages = Json::parse(R"([
    {"role": "user", "content": [
      {"type": "text", "text": "Look:"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
    {"role": "assistant", "content": "A dot."},
    {"role": "user", "content": [
      {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
      {"type": "text", "text": "And?"}]}])");
  std::vector<ImagePart> images;
  Json out = anthropic_to_chat_messages(nullptr, messages, &images);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["content"],
            Json::parse(R"([{"type": "text", "text": "Look:"}, {"type": "image"}])"));
  EXPECT_EQ(out[1]["content"], "A dot.");
  EXPECT_EQ(out[2]["content"][0], Json({{"type", "image"}}));
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].path, "messages[0].content[1]");
  EXPECT_EQ(images[1].source, ImageSource::kHttp);
  Json assistant_image = Json::parse(R"([{"role": "assistant", "content": [
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}])");
  expect_400([&] { anthropic_to_chat_messages(nullptr, assistant_image, &images); },
             "messages[0].content[0].type");
  expect_400([&] { anthropic_to_chat_messages(nullptr, messages); }, "messages[0].content[1].type");
}

TEST(ContentParts, ResponsesInputImages) {
  Json body = Json::parse(R"({"model": "m", "input": [
    {"role": "user", "content": [
      {"type": "input_text", "text": "What is it?"},
      {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/"}]}]})");
  ResponsesRequest r = parse_responses_request(body, {}, 512);
  ASSERT_EQ(r.prompt.images.size(), 1u);
  EXPECT_EQ(r.prompt.images[0].path, "input[0].content[1]");
  EXPECT_EQ(r.prompt.images[0].media_type, "image/jpeg");
  EXPECT_EQ(r.prompt.messages[0]["content"],
            Json::parse(R"([{"type": "text", "text": "What is it?"}, {"type": "image"}])"));
  Json bad = body;
  bad["input"][0]["content"][1]["image_url"] = "data:image/png;base64";
  expect_400([&] { parse_responses_request(bad, {}, 512); }, "input[0].content[1].image_url");
  Json assistant = body;
  assistant["input"][0]["role"] = "assistant";
  expect_400([&] { parse_responses_request(assistant, {}, 512); }, "input[0].content[1].type");
}

}  // namespace image_parts_test
}  // namespace tandem::server
