// `--model FILE.gguf` on the commands: the model, its weight types and its own tokenizer from
// the file; `--tokenizer DIR` replacing the tokenizer; the served name; the text tools on a
// GGUF file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

const fs::path kGguf = fs::path(TANDEM_TEST_DATA) / "oracle" / "gguf" / "llama-F32.gguf";

TEST(GgufModelFiles, LoadsModelTokenizerAndWeightTypes) {
  LoadedModel m = load_model_folder(kGguf, "cpu");
  EXPECT_EQ(m.model->config().model_type, "llama");
  EXPECT_EQ(m.weight_format, "F32: f32 13");
  ASSERT_TRUE(m.tokenizer);
  EXPECT_EQ(m.tokenizer->vocab_size(), 512);
  EXPECT_EQ(m.tokenizer->encode("Hello, world!", false),
            (std::vector<int32_t>{42, 71, 78, 333, 14, 319, 271, 78, 70, 3}));
}

TEST(GgufModelFiles, TokenizerFolderWins) {
  const fs::path dir = fs::temp_directory_path() / ("tandem-tok-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << byte_level_tokenizer_json(600);
  LoadedModel m = load_model_folder(kGguf, "cpu", {}, dir.string());
  EXPECT_EQ(m.tokenizer->vocab_size(), 600);
  EXPECT_EQ(tokenizer_source(kGguf.string(), dir.string()), dir);
  EXPECT_EQ(tokenizer_source(kGguf.string(), std::nullopt), kGguf);
  fs::remove(dir / "tokenizer.json");
  try {
    load_model_folder(kGguf, "cpu", {}, dir.string());
    ADD_FAILURE() << "a --tokenizer folder without tokenizer.json loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json there"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(GgufModelFiles, ServedNames) {
  EXPECT_EQ(default_served_name("a/b/Qwen2.5-7B-Q4_K_M.gguf"), "Qwen2.5-7B-Q4_K_M");
  EXPECT_EQ(default_served_name("x/llama-70b-00001-of-00003.gguf"), "llama-70b");
  EXPECT_EQ(default_served_name("models/tiny-kjv/"), "tiny-kjv");
  EXPECT_EQ(default_served_name("models/tiny-kjv"), "tiny-kjv");
}

TEST(GgufModelFiles, NeitherFolderNorGguf) {
  const fs::path f = fs::temp_directory_path() / ("tandem-notgguf-" + std::to_string(::getpid()));
  std::ofstream(f) << "plain text";
  try {
    load_model_folder(f, "cpu");
    ADD_FAILURE() << "a text file loaded as a model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a model folder nor a GGUF file"), std::string::npos);
  }
  fs::remove(f);
}

TEST(GgufModelFiles, TextToolsReadTheFile) {
  TextToolOptions o;
  o.model = kGguf.string();
  o.text = "Hello, world!";
  testing::internal::CaptureStdout();
  EXPECT_EQ(run_tokenize(o), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "[42,71,78,333,14,319,271,78,70,3]\n");
}

}  // namespace
}  // namespace tandem::cli
