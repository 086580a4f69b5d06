// The GGUF oracle's goldens (tests/data/oracle/gguf/X.golden.safetensors for X.gguf, from
// ../shared/oracle/gguf): per prompt i, prompt.i, greedy.i (16 tokens, no EOS stop) and
// logits.i [L + 16, 512], float64 reference arithmetic stored as f32.
#pragma once

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "loader/gguf_model.h"
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

// The block types of the file's tensors that `backend` would not keep as they are.
inline std::vector<std::string> types_not_held(const std::string& file, const Backend& backend) {
  auto model = GgufModel::open(gguf_dir() / file);
  std::vector<std::string> missing;
  for (const auto& shard : model->shards())
    for (const GgufTensorInfo& t : shard->tensors())
      if (dtype_is_block(t.dtype) && backend.weight_dtype(t.dtype) != t.dtype) {
        std::string name(dtype_name(t.dtype));
        if (std::find(missing.begin(), missing.end(), name) == missing.end()) missing.push_back(name);
      }
  return missing;
}

// TANDEM_REQUIRE_GGUF_KERNELS=1 (set it once the GGUF kernels are merged): a gate that
// cannot run fails instead of skipping.
inline bool gguf_kernels_required() {
  const char* v = std::getenv("TANDEM_REQUIRE_GGUF_KERNELS");
  return v && std::string(v) == "1";
}

// Empty when `backend` holds every block type of the file; else the loud reason the gate
// does not run (a skip message no one can miss in the test log).
inline std::string gate_not_run(const std::string& file, const Backend& backend) {
  std::vector<std::string> missing = types_not_held(file, backend);
  if (missing.empty()) return "";
  std::string list;
  for (auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  return "\n*** GGUF ORACLE GATE NOT RUN: " + file + ": the " + backend.name() +
         " backend does not hold " + list +
         " weights yet (Backend::weight_dtype). Enable with the GGUF kernels. ***\n";
}

}  // namespace tandem::test
