// Every real chat template in tests/data/chat_templates, rendered for the five scenarios of
// tests/data/chat_template_golden.json, must match transformers' output byte for byte, or
// fail where transformers fails. (The two SecurityErrors from Kimi-K2's list.append may also
// render: the oracle README allows it.)
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/jinja.h"

namespace golden_test {

using nlohmann::ordered_json;
using tandem::jinja::RenderOptions;
using tandem::jinja::Template;
using tandem::jinja::TemplateError;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const ordered_json& golden() {
  static const ordered_json g =
      ordered_json::parse(read_file(std::string(TANDEM_TEST_DATA) + "/chat_template_golden.json"));
  return g;
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : golden()["templates"].items()) names.push_back(name);
  return names;
}

// "at byte N: expected ...<excerpt>... got ...<excerpt>..." around the first difference.
std::string diff_excerpt(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i > 60 ? i - 60 : 0;
  auto cut = [&](const std::string& s) {
    return from < s.size() ? s.substr(from, 140) : std::string();
  };
  return "first difference at byte " + std::to_string(i) + " (expected length " +
         std::to_string(want.size()) + ", got " + std::to_string(got.size()) +
         ")\n  expected: " + ordered_json(cut(want)).dump() +
         "\n  got:      " + ordered_json(cut(got)).dump();
}

class ChatTemplateGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGolden, MatchesTransformers) {
  const std::string& name = GetParam();
  const ordered_json& expected = golden()["templates"][name];
  std::string source =
      read_file(std::string(TANDEM_TEST_DATA) + "/chat_templates/" + name + ".jinja");
  ASSERT_FALSE(source.empty()) << "missing template file for " << name;

  if (expected.contains("compile_error")) {
    EXPECT_THROW(Template::parse(source), TemplateError);
    return;
  }
  Template tmpl = [&] {
    try {
      return Template::parse(source);
    } catch (const TemplateError& e) {
      ADD_FAILURE() << name << ": parse failed: " << e.what();
      throw;
    }
  }();

  RenderOptions options;
  options.now = golden()["strftime_now_fixed"].get<std::string>();
  for (const auto& [scenario, result] : expected.items()) {
    ordered_json context = golden()["scenarios"][scenario];
    context["bos_token"] = golden()["bos_token"];
    context["eos_token"] = golden()["eos_token"];
    if (result.contains("error")) {
      std::string error = result["error"].get<std::string>();
      bool may_render = error.rfind("SecurityError", 0) == 0;
      try {
        std::string text = tmpl.render(context, options);
        if (!may_render)
          ADD_FAILURE() << name << "/" << scenario
                        << ": rendered, but transformers fails with: " << error;
      } catch (const TemplateError&) {
      }
      continue;
    }
    std::string want = result["text"].get<std::string>();
    try {
      std::string got = tmpl.render(context, options);
      EXPECT_TRUE(got == want) << name << "/" << scenario << ": " << diff_excerpt(want, got);
    } catch (const TemplateError& e) {
      ADD_FAILURE() << name << "/" << scenario << ": threw: " << e.what();
    }
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  std::replace_if(
      n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllTemplates, ChatTemplateGolden, ::testing::ValuesIn(template_names()),
                         test_name);

// The golden file covers 66 templates x 5 scenarios; losing any would weaken the gate.
TEST(ChatTemplateGoldenFile, CoversAllTemplates) {
  EXPECT_EQ(golden()["templates"].size(), 66u);
  EXPECT_EQ(golden()["scenarios"].size(), 5u);
}

}  // namespace golden_test
