// --pooling and the folder's sentence-transformers files (common/pooling_config.h): each
// mode read from 1_Pooling/config.json through modules.json, the flag winning, and the
// folders tandem would serve other vectors for refused naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "server/common/pooling_config.h"

namespace tandem::server {
namespace {

namespace fs = std::filesystem;

class PoolingConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_pooling_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_ / "1_Pooling");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& rel, const std::string& text) {
    std::ofstream(dir_ / rel) << text;
  }
  void modules(const std::string& after_pooling = "") {
    write("modules.json",
          R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
              {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})" +
              after_pooling + "]");
  }
  void pooling(const std::string& mode, const std::string& extra = "") {
    write("1_Pooling/config.json", R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": false,
          "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false, ")" + mode +
                                       R"(": true, "include_prompt": true)" + extra + "}");
  }
  std::string error_of(const std::string& flag = "auto") {
    try {
      choose_pooling(dir_, flag);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(PoolingConfig, EachModeIsReadThroughModulesJson) {
  modules();
  for (auto [mode, want] : {std::pair{"pooling_mode_lasttoken", Pooling::Last},
                            {"pooling_mode_mean_tokens", Pooling::Mean},
                            {"pooling_mode_cls_token", Pooling::Cls}}) {
    pooling(mode);
    PoolingChoice c = choose_pooling(dir_, "auto");
    EXPECT_EQ(c.pooling, want) << mode;
    EXPECT_NE(c.source, "default");
  }
}

TEST_F(PoolingConfig, TheFlagWinsAndAFolderWithoutFilesDefaultsToLast) {
  modules(R"(, {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})");
  pooling("pooling_mode_mean_tokens");
  EXPECT_EQ(choose_pooling(dir_, "cls").pooling, Pooling::Cls);
  EXPECT_EQ(choose_pooling(dir_, "cls").source, "--pooling");
  fs::remove_all(dir_ / "1_Pooling");
  fs::remove(dir_ / "modules.json");
  EXPECT_EQ(choose_pooling(dir_, "auto").pooling, Pooling::Last);
  EXPECT_EQ(choose_pooling(dir_, "auto").source, "default");
  EXPECT_NE(error_of("max").find("--pooling 'max'"), std::string::npos);
}

TEST_F(PoolingConfig, FoldersThatWouldGetOtherVectorsAreRefusedNamingTheFile) {
  modules();
  pooling("pooling_mode_max_tokens");
  EXPECT_NE(error_of().find("pooling_mode_max_tokens"), std::string::npos);
  EXPECT_NE(error_of().find("1_Pooling"), std::string::npos);
  pooling("pooling_mode_lasttoken", R"(, "pooling_mode_mean_sqrt_len_tokens": true)");
  EXPECT_NE(error_of().find("pooling_mode_mean_sqrt_len_tokens"), std::string::npos);
  write("1_Pooling/config.json", R"({"pooling_mode_lasttoken": true, "pooling_mode_cls_token": true})");
  EXPECT_NE(error_of().find("several"), std::string::npos);
  write("1_Pooling/config.json", R"({"pooling_mode_lasttoken": true, "include_prompt": false})");
  EXPECT_NE(error_of().find("include_prompt"), std::string::npos);
  pooling("pooling_mode_lasttoken");
  modules(R"(, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})");
  EXPECT_NE(error_of().find("2_Dense"), std::string::npos);
  EXPECT_NE(error_of("last").find("2_Dense"), std::string::npos);  // the flag cannot fix that
  write("modules.json", "{not json");
  EXPECT_NE(error_of().find("modules.json"), std::string::npos);
}

}  // namespace
}  // namespace tandem::server
