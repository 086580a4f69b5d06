// The prompt of an image request against transformers' processors, for every case of the
// vision oracle (tests/data/oracle/vision/<model>/golden.json): the chat template rendered
// with {"type": "image"} items gives the oracle's text, and once each marker is expanded
// (request_images.h) and the text tokenized, the ids are the processor's input_ids and the
// spans cover exactly its image tokens. The processor's ids live in golden.safetensors
// (input_ids.i), which comes with the vision side's fixtures; until those are in
// tests/data, the shared oracle folder is read when it exists (the id check is skipped,
// saying so, when neither is there; the rest always runs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "core/base64.h"
#include "loader/safetensors.h"
#include "server/common/chat_prompt.h"
#include "server/common/request_images.h"
#include "server/common/served_images.h"

namespace tandem::server {
namespace image_prompt_golden_test {

namespace fs = std::filesystem;

fs::path model_dir(const std::string& name) {
  return fs::path(TANDEM_TEST_DATA) / "oracle/vision" / name;
}

// golden.safetensors: the project's copy, else the shared oracle's; empty path if neither.
fs::path golden_ids_file(const std::string& name) {
  for (fs::path p : {model_dir(name) / "golden.safetensors",
                     fs::path("/work/shared/oracle/vision") / name / "golden.safetensors"})
    if (fs::exists(p)) return p;
  return {};
}

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The case's images as data: URL parts, in order.
std::vector<ImagePart> image_parts(const std::string& name, const Json& test_case) {
  std::vector<ImagePart> parts;
  for (const Json& file : test_case["images"]) {
    std::string bytes = file_bytes(model_dir(name) / file.get<std::string>());
    ImagePart p;
    p.path = "images[" + std::to_string(parts.size()) + "]";
    p.payload = base64::encode({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    parts.push_back(std::move(p));
  }
  return parts;
}

class ImagePromptGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = model_dir(GetParam());
    tokenizer_ = Tokenizer::load(dir_);
    builder_ = ChatPromptBuilder::create(TokenizerConfig::load(dir_), tokenizer_);
    ASSERT_TRUE(builder_);
    served_ = load_served_images(dir_, *tokenizer_, /*model_takes_images=*/true, "");
    golden_ = read_json(dir_ / "golden.json");
  }
  fs::path dir_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatPromptBuilder> builder_;
  ServedImages served_;
  Json golden_;
};

TEST_P(ImagePromptGolden, RenderedExpandedAndTokenizedAsTheProcessor) {
  ASSERT_TRUE(served_.takes_images);
  EXPECT_EQ(served_.soft_token_id, golden_["image_token_id"].get<int32_t>());
  fs::path ids_file = golden_ids_file(GetParam());
  std::shared_ptr<SafetensorsFile> ids =
      ids_file.empty() ? nullptr : SafetensorsFile::open(ids_file);
  if (!ids)
    std::cout << "[ note ] no golden.safetensors for " << GetParam()
              << ": input_ids not compared\n";
  const Json& cases = golden_["cases"];
  ASSERT_EQ(cases.size(), 5u);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    ChatPromptInput input;
    input.messages = cases[i]["messages"];  // already in the template's shape
    input.images = image_parts(GetParam(), cases[i]);
    std::vector<ProcessedImage> images =
        process_request_images(served_, input.images, MediaLimits{}, MediaFetchPolicy{});
    RenderedPrompt rendered = builder_->render_prompt(input);
    EXPECT_EQ(rendered.text, cases[i]["rendered"].get<std::string>());
    expand_image_markers(rendered, *served_.processor, images, "messages");
    std::vector<int32_t> tokens = builder_->tokenize(rendered);
    EXPECT_EQ(int(tokens.size()), cases[i]["prompt_len"].get<int>());
    std::vector<MediaSpan> spans = image_spans(tokens, served_.soft_token_id, images);
    int covered = 0;
    for (const MediaSpan& s : spans) {
      covered += s.length;
      for (int32_t k = s.start; k < s.start + s.length; ++k)
        EXPECT_EQ(tokens[size_t(k)], served_.soft_token_id);
    }
    EXPECT_EQ(covered, cases[i]["image_tokens"].get<int>());
    EXPECT_EQ(spans.size(), input.images.size());  // no pan-and-scan crops in these configs
    if (!ids) continue;
    Tensor want = ids->tensor("input_ids." + std::to_string(i));
    std::vector<int32_t> expected(want.ptr<int32_t>(), want.ptr<int32_t>() + want.numel());
    EXPECT_EQ(tokens, expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Oracle, ImagePromptGolden,
                         ::testing::Values("gemma3_vision", "gemma4_vision_bidir"));

}  // namespace image_prompt_golden_test
}  // namespace tandem::server
