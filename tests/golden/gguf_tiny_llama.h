// Test-only: a minimal GGUF tensor reader and the oracle's one-layer llama forward over a
// Backend, to check the block-type kernels against tests/data/oracle/gguf/'s float64 goldens
// without the model loader. The reader trusts the oracle's files (bounds are checked, nothing
// more); the forward is the oracle README's arithmetic: the llama.cpp row order of attn_q and
// attn_k kept, so RoPE turns adjacent pairs (2i, 2i + 1), each by pos·θ^(−2i/Dh) / rope_freqs[i].
// Every projection and the embedding run on the backend with the weights in their stored
// dtype; norms, RoPE, attention and SiLU are plain loops in double.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace tandem::test {

class GgufTestFile {
 public:
  explicit GgufTestFile(const std::filesystem::path& path);

  // A host tensor of the file's bytes as stored: shape [ne1, ne0] (row-major, ne0 the row).
  Tensor tensor(const std::string& name) const;
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // A numeric metadata value (integers and floats alike).
  double number(const std::string& key) const;

 private:
  struct Info {
    DType dtype;
    Shape shape;
    uint64_t offset;
  };
  std::vector<uint8_t> bytes_;
  std::map<std::string, Info> tensors_;
  std::map<std::string, double> numbers_;
  size_t data_start_ = 0;
};

// Teacher-forced logits [T, vocab] of `tokens` through the file's model: the weights uploaded
// in their stored dtype, or (dequantize_first) decoded to f32 on the host first.
std::vector<float> tiny_llama_logits(Backend& be, const GgufTestFile& file,
                                     const std::vector<int32_t>& tokens, bool dequantize_first);

}  // namespace tandem::test
