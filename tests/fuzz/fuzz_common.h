// What the fuzz targets share: where the test data is, and how a target reports a broken
// invariant (abort, so libFuzzer keeps the input as a crash).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tandem::fuzz {

inline std::string data_dir() {
  return TANDEM_TEST_DATA;
}
inline std::string oracle_dir(const char* name) {
  return data_dir() + "/oracle/" + name;
}

[[noreturn]] inline void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace tandem::fuzz
