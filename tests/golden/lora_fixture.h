// The LoRA oracle fixtures (tests/data/oracle/lora/<arch>/, made by PEFT + transformers with
// ../shared/oracle/lora/make_lora.py): the architectures present and each one's adapters
// (lora_<name>/ folders), found at run time so fixtures added later are tested too.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace tandem::test {

inline std::filesystem::path lora_root() {
  return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "lora";
}

// Without the fixture folder the list is one name that no folder has, so the tests that use
// it fail on the missing files instead of the binary failing while it lists its tests.
inline std::vector<std::string> lora_archs() {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(lora_root(), ec), end; !ec && it != end;
       it.increment(ec))
    if (it->is_directory()) out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  if (out.empty()) out.push_back("missing_fixtures");
  return out;
}

// The adapters' short names: "a" for lora_a/.
inline std::vector<std::string> adapter_names(const std::string& arch) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(lora_root() / arch)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.starts_with("lora_")) out.push_back(n.substr(5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tandem::test
