// Reading a model folder's processor settings in both layouts (transformers 5's nested
// processor_config.json, the Hub's flat preprocessor_config.json), the prompt spec from
// tokenizer_config.json + config.json, and every way a config can be refused.
#include "media/processor_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "media/image_processor.h"
#include "media/image_prompt.h"
#include "media/media_error.h"
#include "test_files.h"

namespace tandem {
namespace processor_config_test {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("tandem_media_" + std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const nlohmann::json& j) const {
    std::ofstream(path_ / name) << j.dump(2);
  }

 private:
  fs::path path_;
};

MediaError config_error(const nlohmann::json& image_processor) {
  try {
    parse_image_processor_config(image_processor, {}, {}, "test.json");
  } catch (const MediaError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted " << image_processor.dump();
  return MediaError(MediaErrorKind::kCorrupt, "");
}

TEST(ProcessorConfig, NestedLayoutFromTheOracle) {
  const ImageProcessorConfig c = read_image_processor_config(test::vision_oracle_dir("gemma3_vision"));
  EXPECT_EQ(c.kind, ImageProcessorKind::kGemma3);
  EXPECT_EQ(c.resample, ResampleFilter::kBilinear);
  EXPECT_EQ(c.height, 64);
  EXPECT_EQ(c.width, 64);
  EXPECT_EQ(c.image_seq_length, 16);  // processor_config.json's image_seq_length
  EXPECT_TRUE(c.do_normalize);
  EXPECT_EQ(c.image_mean[1], 0.5f);
  EXPECT_FALSE(c.pan_and_scan.enabled);
  const ImageProcessorConfig g4 =
      read_image_processor_config(test::vision_oracle_dir("gemma4_vision_bidir"));
  EXPECT_EQ(g4.kind, ImageProcessorKind::kGemma4);
  EXPECT_EQ(g4.resample, ResampleFilter::kBicubic);
  EXPECT_EQ(g4.patch_size, 4);
  EXPECT_EQ(g4.pooling_kernel_size, 3);
  EXPECT_EQ(g4.max_soft_tokens, 70);
  EXPECT_FALSE(g4.do_normalize);
}

TEST(ProcessorConfig, HubFlatLayoutAndModelFallbacks) {
  TempDir dir;
  // The Hub's gemma-3 files: the image processor flat, the processor file without it, and
  // mm_tokens_per_image in config.json.
  dir.write("preprocessor_config.json",
            {{"image_processor_type", "Gemma3ImageProcessor"}, {"resample", 2},
             {"size", {{"height", 896}, {"width", 896}}}, {"do_pan_and_scan", nullptr},
             {"image_mean", {0.5, 0.5, 0.5}}, {"image_std", {0.5, 0.5, 0.5}}});
  dir.write("processor_config.json", {{"processor_class", "Gemma3Processor"}});
  dir.write("config.json", {{"mm_tokens_per_image", 256}, {"image_token_index", 262144},
                            {"boi_token_index", 255999}, {"eoi_token_index", 256000}});
  const ImageProcessor proc = ImageProcessor::load(dir.path());
  EXPECT_EQ(proc.config().height, 896);
  EXPECT_EQ(proc.config().image_seq_length, 256);
  EXPECT_FALSE(proc.config().pan_and_scan.enabled);  // null: unset
  const ImagePromptSpec& spec = proc.prompt_spec();
  EXPECT_EQ(spec.marker, "<start_of_image>");  // defaults: no tokenizer_config.json here
  EXPECT_EQ(spec.soft, "<image_soft_token>");
  EXPECT_EQ(spec.soft_id, 262144);
  EXPECT_EQ(spec.begin_id, 255999);
  EXPECT_EQ(spec.end_id, 256000);
}

TEST(ProcessorConfig, NoImageProcessorIsAConfigError) {
  TempDir dir;
  dir.write("processor_config.json", {{"image_seq_length", 4}});
  try {
    ImageProcessor::load(dir.path());
    FAIL() << "loaded";
  } catch (const MediaError& e) {
    EXPECT_EQ(e.kind(), MediaErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("no image processor settings"), std::string::npos);
  }
  dir.write("preprocessor_config.json", {{"image_processor_type", "SiglipImageProcessor"}});
  try {
    ImageProcessor::load(dir.path());
    FAIL() << "loaded";
  } catch (const MediaError& e) {
    EXPECT_NE(std::string(e.what()).find("SiglipImageProcessor"), std::string::npos) << e.what();
  }
}

TEST(ProcessorConfig, BadValuesNameTheKey) {
  const nlohmann::json g3 = {{"image_processor_type", "Gemma3ImageProcessor"}};
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = g3;
    j[key] = v;
    return j;
  };
  for (const auto& [key, value] : std::vector<std::pair<const char*, nlohmann::json>>{
           {"resample", 9}, {"resample", "bilinear"}, {"do_resize", 1},
           {"image_mean", {0.5, 0.5}}, {"size", {{"shortest_edge", 224}}}, {"size", 0},
           {"rescale_factor", "x"}, {"pan_and_scan_max_num_crops", 0}}) {
    const MediaError e = config_error(with(key, value));
    EXPECT_EQ(e.kind(), MediaErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test.json"), std::string::npos) << e.what();
  }
  const MediaError e = config_error(
      {{"image_processor_type", "Gemma4ImageProcessor"}, {"max_soft_tokens", 100}});
  EXPECT_NE(std::string(e.what()).find("70, 140, 280, 560, 1120"), std::string::npos) << e.what();
}

TEST(ProcessorConfig, ScalarMeanAndIntegerSize) {
  const ImageProcessorConfig c = parse_image_processor_config(
      {{"image_processor_type", "Gemma3ImageProcessorFast"}, {"size", 224}, {"image_mean", 0.25},
       {"do_pan_and_scan", true}, {"pan_and_scan_min_crop_size", 128}},
      {{"image_seq_length", 64}}, {}, "x");
  EXPECT_EQ(c.height, 224);
  EXPECT_EQ(c.width, 224);
  EXPECT_EQ(c.image_mean[2], 0.25f);
  EXPECT_TRUE(c.pan_and_scan.enabled);
  EXPECT_EQ(c.pan_and_scan.min_crop_size, 128);
  EXPECT_EQ(c.pan_and_scan.max_num_crops, 4);  // Gemma3Processor's default
  EXPECT_EQ(c.image_seq_length, 64);
}

TEST(ImagePrompt, SpecFromTheOracleTokenizerConfigs) {
  const ImagePromptSpec g3 = read_image_prompt_spec(test::vision_oracle_dir("gemma3_vision"),
                                                    ImageProcessorKind::kGemma3);
  EXPECT_EQ(g3.marker, "<start_of_image>");
  EXPECT_EQ(g3.begin, "<start_of_image>");
  EXPECT_EQ(g3.soft, "<image_soft_token>");
  EXPECT_EQ(g3.end, "<end_of_image>");
  const ImagePromptSpec g4 = read_image_prompt_spec(test::vision_oracle_dir("gemma4_vision_bidir"),
                                                    ImageProcessorKind::kGemma4);
  EXPECT_EQ(g4.marker, "<|image|>");
  EXPECT_EQ(g4.begin, "<|image>");
  EXPECT_EQ(g4.end, "<image|>");
  EXPECT_EQ(g4.around, "");
}

TEST(ImagePrompt, TokensUnderExtraSpecialTokensOrAsAddedTokens) {
  const nlohmann::json tokenizer = {
      {"extra_special_tokens", {{"boi_token", "<B>"}, {"image_token", "<S>"}}},
      {"eoi_token", {{"content", "<E>"}, {"special", true}}}};
  const ImagePromptSpec s = parse_image_prompt_spec(tokenizer, {{"image_token_id", 7}},
                                                    ImageProcessorKind::kGemma4);
  EXPECT_EQ(s.begin, "<B>");
  EXPECT_EQ(s.soft, "<S>");
  EXPECT_EQ(s.end, "<E>");
  EXPECT_EQ(s.marker, "<S>");
  EXPECT_EQ(s.soft_id, 7);
  EXPECT_EQ(s.begin_id, std::nullopt);
}

TEST(ImagePrompt, ExpansionTextAsTheProcessorsWriteIt) {
  ImagePromptSpec g3 = parse_image_prompt_spec({}, {}, ImageProcessorKind::kGemma3);
  const int one[] = {3};
  EXPECT_EQ(image_prompt_text(g3, one),
            "\n\n<start_of_image><image_soft_token><image_soft_token><image_soft_token>"
            "<end_of_image>\n\n");
  g3.soft = "S";
  const int crops[] = {1, 1, 2};
  EXPECT_EQ(image_prompt_text(g3, crops),
            "Here is the original image \n\n<start_of_image>S<end_of_image>\n\n and here are some "
            "crops to help you see better \n\n<start_of_image>S<end_of_image>\n\n "
            "\n\n<start_of_image>SS<end_of_image>\n\n");
  const ImagePromptSpec g4 = parse_image_prompt_spec({}, {}, ImageProcessorKind::kGemma4);
  const int two[] = {2};
  EXPECT_EQ(image_prompt_text(g4, two), "<|image><|image|><|image|><image|>");
}

}  // namespace processor_config_test
}  // namespace tandem
