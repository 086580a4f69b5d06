// The GGUF oracle's goldens (tests/data/oracle/gguf/X.golden.safetensors for X.gguf, from
// ../shared/oracle/gguf): per prompt i, prompt.i, greedy.i (16 tokens, no EOS stop) and
// logits.i [L + 16, 512], float64 reference arithmetic stored as f32.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "loader/safetensors.h"

namespace tandem::test {

inline std::filesystem::path gguf_dir() { return std::filesystem::path(TANDEM_TEST_DATA) / "oracle" / "gguf"; }

struct GgufGolden {
  std::vector<int32_t> prompt, greedy;
  Tensor logits;  // [L + 16, 512]
};

inline std::vector<GgufGolden> load_gguf_golden(const std::string& file) {
  auto g = SafetensorsFile::open(gguf_dir() / (file.substr(0, file.size() - 5) + ".golden.safetensors"));
  std::vector<GgufGolden> out;
  auto ids = [&](const std::string& name) {
    Tensor t = g->tensor(name);
    return std::vector<int32_t>(t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel());
  };
  for (int i = 0; g->has("prompt." + std::to_string(i)); i++) {
    const std::string s = std::to_string(i);
    GgufGolden p{ids("prompt." + s), ids("greedy." + s), Tensor::empty_host(DType::F32, {})};
    Tensor l = g->tensor("logits." + s);
    p.logits = Tensor::empty_host(DType::F32, l.shape);
    std::memcpy(p.logits.data, l.data, l.nbytes());
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tandem::test
