// PEFT adapter folders: the config's scaling rules, PEFT's name matching, and the clear
// refusals (unsupported options, tensors that are not LoRA weights, modules the model
// lacks, shapes that do not fit, ranks above the capacity).
#include <gtest/gtest.h>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "loader/safetensors_writer.h"
#include "model/lora/lora_slots.h"
#include "model/model.h"

namespace tandem {
namespace peft_adapter_test {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path oracle(const std::string& p) { return fs::path(TANDEM_TEST_DATA) / "oracle" / p; }

json base_config() {
  return {{"peft_type", "LORA"}, {"r", 4}, {"lora_alpha", 8}, {"target_modules", {"q_proj", "v_proj"}},
          {"bias", "none"}, {"use_dora", false}, {"modules_to_save", nullptr}};
}

std::string refusal(const json& j) {
  try {
    PeftConfig::parse(j, "cfg");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PeftConfig, ScalingFollowsRsloraAndPatterns) {
  json j = base_config();
  j["rank_pattern"] = {{"layers.1.self_attn.q_proj", 2}};
  j["alpha_pattern"] = {{"v_proj", 2}};
  PeftConfig c = PeftConfig::parse(j, "cfg");
  EXPECT_FLOAT_EQ(c.scaling_of("model.layers.0.self_attn.q_proj"), 2.f);  // 8 / 4
  EXPECT_EQ(c.rank_of("model.layers.1.self_attn.q_proj"), 2);
  EXPECT_FLOAT_EQ(c.scaling_of("model.layers.1.self_attn.q_proj"), 4.f);  // 8 / 2
  EXPECT_FLOAT_EQ(c.scaling_of("model.layers.0.self_attn.v_proj"), 0.5f); // 2 / 4
  j["use_rslora"] = true;
  EXPECT_FLOAT_EQ(PeftConfig::parse(j, "cfg").scaling_of("model.layers.0.self_attn.q_proj"), 4.f);  // 8 / √4
}

TEST(PeftConfig, MatchesTargetsAsPeftDoes) {
  PeftConfig c = PeftConfig::parse(base_config(), "cfg");
  EXPECT_TRUE(c.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.qq_proj"));
  EXPECT_FALSE(c.targets("model.layers.0.self_attn.o_proj"));
  json j = base_config();
  j["target_modules"] = ".*layers\\.1\\..*(q|k)_proj";
  PeftConfig r = PeftConfig::parse(j, "cfg");
  EXPECT_TRUE(r.targets("model.layers.1.self_attn.k_proj"));
  EXPECT_FALSE(r.targets("model.layers.0.self_attn.k_proj"));
}

TEST(PeftConfig, RefusesWhatItDoesNotCompute) {
  for (auto [key, value] : std::vector<std::pair<std::string, json>>{
           {"use_dora", true}, {"modules_to_save", {"lm_head"}}, {"lora_bias", true},
           {"bias", "all"}, {"fan_in_fan_out", true}, {"peft_type", "IA3"}}) {
    json j = base_config();
    j[key] = value;
    EXPECT_NE(refusal(j).find(key), std::string::npos) << key << ": " << refusal(j);
  }
  json j = base_config();
  j.erase("target_modules");
  EXPECT_NE(refusal(j).find("target_modules"), std::string::npos);
}

// A folder with `config` and one module's A [r, K] and B [N, r].
fs::path write_adapter(const std::string& tag, const json& config, const std::string& module,
                       int64_t r, int64_t K, int64_t N) {
  fs::path dir = fs::temp_directory_path() / ("tandem_peft_" + tag + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "adapter_config.json") << config.dump();
  SafetensorsWriter w;
  auto fill = [](void* dst, size_t bytes) { std::memset(dst, 0, bytes); };
  w.add("base_model.model." + module + ".lora_A.weight", DType::F32, {r, K}, fill);
  w.add("base_model.model." + module + ".lora_B.weight", DType::F32, {N, r}, fill);
  w.write(dir / "adapter_model.safetensors");
  return dir;
}

std::string write_refusal(const fs::path& dir, int max_rank = 8) {
  auto be = make_cpu_backend();
  auto model = load_model(oracle("llama"), *be,
                          LoadOptions{.lora = {.max_loras = 1, .max_rank = max_rank}});
  try {
    write_lora_slot(*be, model->lora_targets(), 1, load_peft_adapter(dir));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PeftAdapter, RefusesModulesThatDoNotFitTheModel) {
  json c = base_config();
  c["target_modules"] = {"q_proj", "x_proj"};
  EXPECT_NE(write_refusal(write_adapter("unknown", c, "model.layers.0.self_attn.x_proj", 4, 64, 64))
                .find("x_proj' is not a projection"),
            std::string::npos);
  EXPECT_NE(write_refusal(write_adapter("shape", c, "model.layers.0.self_attn.q_proj", 4, 63, 64))
                .find("do not fit"),
            std::string::npos);
  EXPECT_NE(write_refusal(write_adapter("rank", c, "model.layers.0.self_attn.q_proj", 4, 64, 64), 2)
                .find("max LoRA rank"),
            std::string::npos);
  EXPECT_EQ(write_refusal(write_adapter("fits", c, "model.layers.0.self_attn.q_proj", 4, 64, 64)), "");
  EXPECT_THROW(load_peft_adapter(write_adapter("norank", c, "model.layers.0.self_attn.q_proj", 3, 64, 64)), Error);
  EXPECT_THROW(load_peft_adapter(write_adapter("untargeted", c, "model.layers.0.self_attn.o_proj", 4, 64, 64)), Error);
}

}  // namespace peft_adapter_test
}  // namespace tandem
