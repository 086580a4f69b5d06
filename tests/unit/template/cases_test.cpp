// The table-driven template checks: every group of cases/*.json (written by make_cases.py)
// is one test, named <file>_<group>. Each case's expectation is what jinja2 3.1 running
// transformers' sandboxed chat-template environment produced for it: the rendered text, or
// for an error case the exception ("ErrorType: message"; tandem must throw a TemplateError
// whose message contains the message part). Nothing here comes from tandem.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/jinja.h"

namespace tandem::jinja {
namespace cases_test {

using nlohmann::ordered_json;

struct CaseGroup {
  std::string file;  // the table's file stem: whitespace, filters, ...
  std::string name;
  ordered_json cases;  // [{source, context?, text | error}]
};

void PrintTo(const CaseGroup& g, std::ostream* os) { *os << g.file << "/" << g.name; }

std::filesystem::path cases_dir() {
  return std::filesystem::path(TANDEM_TEST_DATA).parent_path() / "unit" / "template" / "cases";
}

// Read at test registration; a table that fails to load registers nothing, which
// TablesLoad below reports.
std::vector<CaseGroup> load_groups() {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(cases_dir(), ec))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<CaseGroup> groups;
  for (const auto& path : files) {
    std::ifstream in(path);
    ordered_json doc = ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("groups")) continue;
    for (const auto& g : doc["groups"])
      groups.push_back({path.stem().string(), g.value("name", ""), g.value("cases", ordered_json())});
  }
  return groups;
}

const std::vector<CaseGroup>& all_groups() {
  static const std::vector<CaseGroup> groups = load_groups();
  return groups;
}

std::string render(const ordered_json& c) {
  RenderOptions options;
  options.now = "2026-11-29T12:00:00";
  return Template::parse(c["source"].get<std::string>())
      .render(c.value("context", ordered_json::object()), options);
}

// The message part of jinja2's "ErrorType: message" (raise_exception's text is verbatim).
std::string error_text(const std::string& expected) {
  auto colon = expected.find(": ");
  return colon == std::string::npos ? expected : expected.substr(colon + 2);
}

void check_case(const ordered_json& c) {
  SCOPED_TRACE("template: " + c["source"].get<std::string>());
  if (c.contains("text")) {
    try {
      EXPECT_EQ(render(c), c["text"].get<std::string>());
    } catch (const TemplateError& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
    return;
  }
  const std::string expected = c["error"].get<std::string>();
  try {
    std::string got = render(c);
    ADD_FAILURE() << "rendered " << ::testing::PrintToString(got)
                  << ", expected error: " << expected;
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find(error_text(expected)), std::string::npos)
        << "message: " << e.what() << "\nwanted:  " << expected;
  }
}

class JinjaCases : public ::testing::TestWithParam<CaseGroup> {};

TEST_P(JinjaCases, MatchJinja2) {
  ASSERT_TRUE(GetParam().cases.is_array() && !GetParam().cases.empty());
  for (const auto& c : GetParam().cases) check_case(c);
}

INSTANTIATE_TEST_SUITE_P(Tables, JinjaCases, ::testing::ValuesIn(all_groups()),
                         [](const auto& info) { return info.param.file + "_" + info.param.name; });

// Guards the registration above: a missing or unreadable table would otherwise just
// register fewer tests.
TEST(JinjaCasesTables, AllLoad) {
  size_t num_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cases_dir()))
    num_files += entry.path().extension() == ".json";
  EXPECT_GE(num_files, 8u);
  std::vector<std::string> files;
  for (const auto& g : all_groups())
    if (files.empty() || files.back() != g.file) files.push_back(g.file);
  EXPECT_EQ(files.size(), num_files) << "a table failed to parse";
  EXPECT_GE(all_groups().size(), 37u);
}

}  // namespace cases_test
}  // namespace tandem::jinja
