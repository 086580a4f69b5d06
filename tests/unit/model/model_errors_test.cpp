// Loading a model folder that is wrong in any way fails with one clear error naming
// the file, tensor or field — never a crash, never a silently wrong model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model.h"

namespace tandem {
namespace model_errors_test {

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

TEST_F(BrokenModel, MoreLayersThanTheCheckpointHolds) {
  edit_config([](json& j) { j["num_hidden_layers"] = 5; });  // the file has 4 layers
  std::string e = load_error();
  EXPECT_NE(e.find("num_hidden_layers is 5, but the checkpoint holds tensors for 4 layers"),
            std::string::npos) << e;
}

TEST_F(BrokenModel, MissingTensor) {
  fs::path st = dir_ / "model.safetensors";
  // Rename one tensor in the header (same length, so every offset stays valid).
  std::ifstream in(st, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  size_t at = bytes.find("model.layers.2.mlp.up_proj.weight");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 33, "model.layers.2.mlp.up_prxj.weight");
  std::ofstream(st, std::ios::binary | std::ios::trunc) << bytes;
  std::string e = load_error();
  EXPECT_NE(e.find("model.layers.2.mlp.up_proj.weight"), std::string::npos) << e;
}

// Peak resident memory growth while `fn` runs (VmHWM, reset through /proc/self/clear_refs),
// in bytes; nullopt where the kernel does not let the peak be reset.
template <typename Fn>
std::optional<int64_t> peak_growth(Fn&& fn) {
  auto status = [](const char* key) {
    std::ifstream in("/proc/self/status");
    std::string k;
    int64_t kb = 0;
    while (in >> k) {
      if (k == key) {
        in >> kb;
        return kb * 1024;
      }
      in.ignore(1 << 20, '\n');
    }
    return int64_t(-1);
  };
  std::ofstream clear("/proc/self/clear_refs");
  if (!(clear << "5" << std::flush)) return std::nullopt;
  const int64_t before = status("VmRSS:");
  fn();
  return status("VmHWM:") - before;
}

// Sizes no checkpoint could back are refused before anything is allocated for them, each
// naming the field and its value — not by allocating per-layer state first (1,000,000 layers
// once cost 17.5 s and 4.1 GB before the refusal) nor by wrapping 2^40 to 0.
TEST_F(BrokenModel, AbsurdSizesAreRefusedBeforeAllocating) {
  struct Case {
    const char* field;
    json value;
    const char* expect;
  };
  const Case cases[] = {
      {"num_hidden_layers", 1000000, "num_hidden_layers is 1000000; tandem reads at most 65536"},
      {"num_hidden_layers", 60000, "num_hidden_layers is 60000, but the checkpoint holds tensors for 4"},
      {"num_hidden_layers", int64_t(1) << 40, "'num_hidden_layers' is 1099511627776, outside"},
      {"vocab_size", int64_t(1) << 40, "'vocab_size' is 1099511627776, outside"},
      {"vocab_size", 2000000000, "weight 'embed' has shape [512, 64] but the config implies [2000000000, 64]"},
      {"hidden_size", int64_t(1) << 40, "'hidden_size' is 1099511627776"},
      {"intermediate_size", 2000000000, "[4000000000, 64]"},
      {"num_attention_heads", 2000000000, "the config implies [32000000064, 64]"},
      {"head_dim", 1 << 30, "layers.0.qkv"},
      {"max_position_embeddings", int64_t(1) << 40, "'max_position_embeddings' is 1099511627776"},
      {"eos_token_id", int64_t(1) << 40, "'eos_token_id' is 1099511627776"},
  };
  for (const Case& c : cases) {
    edit_config([&](json& j) { j[c.field] = c.value; });
    std::string e;
    auto growth = peak_growth([&] { e = load_error(); });
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.field << " = " << c.value << ": " << e;
    if (growth) {
      EXPECT_LT(*growth, int64_t(64) << 20) << c.field << " = " << c.value;
    }
    SetUp();  // a fresh copy of the folder
  }
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

}  // namespace model_errors_test
}  // namespace tandem
