// How a checkpoint tensor name answers from a GGUF model: one GGUF tensor, or a range of its
// rows, read as stored or rearranged the way the model that wrote it differs from the
// Hugging Face layout tandem's architectures expect. The model module builds these per
// architecture (model/gguf_names.h); the loader only applies them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace tandem {

class GgufModel;

struct GgufAlias {
  struct Rows {
    int64_t first = 0;
    int64_t count = 0;
  };

  std::string gguf_name;
  // Rows [first, first + count) along dim 0 (a fused attn_qkv's q, k or v; one expert of a
  // stacked [E, N, K] tensor, taken as [N, K]); nullopt: the whole tensor. A view: no copy.
  std::optional<Rows> rows;
  // > 0: llama.cpp's permutation of the llama architecture's Q and K rows is undone, per
  // head of rows / heads rows (GGUF row 2i + j of a head is Hugging Face row i + j·half).
  // Whole rows move, so a block type is rearranged without being decoded. A copy.
  int unpermute_heads = 0;
  // Added to every value (f32 only): Gemma's norms, which llama.cpp stores as 1 + w while
  // tandem's Gemma adds the 1 itself. A copy.
  float add = 0.f;
};

// The tensor `alias` names, as a host tensor (a view of the mapping when no copy is needed).
// Throws tandem::Error naming `name` when the GGUF tensor is absent or does not fit the alias.
Tensor read_gguf_alias(const GgufModel& model, const std::string& name, const GgufAlias& alias);

// The rows of `t` [R, ...] (or the elements of a vector [R]) reordered per head: row
// h·D + i + j·D/2 of the result is row h·D + 2i + j of t, D = R / heads.
Tensor unpermute_head_rows(const Tensor& t, int heads);

}  // namespace tandem
