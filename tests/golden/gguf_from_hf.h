// A test-only converter: an oracle Hugging Face folder (tests/data/oracle/<arch>) written as
// the GGUF file llama.cpp's convert_hf_to_gguf.py would make of it (its conventions, read
// from its source: names, metadata keys, the llama architecture's Q/K row permutation, Llama
// 3 scaling as a rope_freqs tensor, Gemma's norms stored as 1 + w, tied embeddings without
// output.weight, experts stacked [E, N, K], 1-D tensors f32). Weights keep their stored
// dtype (bf16). Loading the result must reproduce the folder's transformers goldens.
#pragma once

#include <filesystem>

namespace tandem::test {

struct HfToGgufOptions {
  bool drop_output = false;  // leave output.weight out even when the folder has an lm_head
  bool f16 = false;          // matrices as F16 instead of their stored bf16
  int shards = 1;            // > 1: NAME-0000k-of-0000N.gguf beside `out` (out names shard 1)
};

void write_gguf_from_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& out,
                        const HfToGgufOptions& options = {});

}  // namespace tandem::test
