// Loading a model folder that is wrong in any way fails with one clear error naming
// the file, tensor or field — never a crash, never a silently wrong model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class BrokenModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_model_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::copy(fs::path(TANDEM_TEST_DATA) / "oracle" / "llama", dir_);
    for (auto& e : fs::directory_iterator(dir_))
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void edit_config(const std::function<void(json&)>& f) {
    json j = json::parse(std::ifstream(dir_ / "config.json"));
    f(j);
    std::ofstream(dir_ / "config.json") << j.dump();
  }
  std::string load_error() {
    auto backend = make_cpu_backend();
    try {
      load_model(dir_, *backend);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(BrokenModel, ValidFolderLoads) { EXPECT_EQ(load_error(), ""); }

TEST_F(BrokenModel, UnknownModelType) {
  edit_config([](json& j) { j["model_type"] = "gpt_neo_x9"; });
  std::string e = load_error();
  EXPECT_NE(e.find("gpt_neo_x9"), std::string::npos) << e;
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
}

TEST_F(BrokenModel, ShapesThatDisagreeWithTheWeights) {
  edit_config([](json& j) { j["intermediate_size"] = 96; });
  std::string e = load_error();
  EXPECT_NE(e.find("gate_up"), std::string::npos) << e;
  EXPECT_NE(e.find("[256, 64]"), std::string::npos) << e;  // what the file holds
}

TEST_F(BrokenModel, MissingTensor) {
  edit_config([](json& j) { j["num_hidden_layers"] = 5; });  // the file has 4 layers
  std::string e = load_error();
  EXPECT_NE(e.find("model.layers.4."), std::string::npos) << e;
}

TEST_F(BrokenModel, MissingWeightsFile) {
  fs::remove(dir_ / "model.safetensors");
  EXPECT_NE(load_error().find(dir_.string()), std::string::npos);
}

TEST_F(BrokenModel, TruncatedWeightsFile) {
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") / 2);
  std::string e = load_error();
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
}

TEST_F(BrokenModel, CorruptConfig) {
  std::ofstream(dir_ / "config.json") << "{ not json";
  EXPECT_NE(load_error().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace tandem
