// Which type each tensor of a GGUF file gets under a llama.cpp file type ("Q4_K_M", ...): the
// choice llama-quantize makes (llama.cpp src/llama-quant.cpp, llama_tensor_get_type), for the
// dense models `tandem quantize --gguf` writes, so our files have the mix of types — and so
// the size and accuracy — of the files people download:
//   - 1-D tensors (norms, biases, rope_freqs) stay F32; F32 / F16 files hold every matrix so;
//   - output.weight (token_embd.weight when the embedding is tied) is Q6_K, or Q8_0 in a Q8_0
//     file, or Q8_0 when its rows are not whole blocks of the file's type;
//   - Q4_K_M / Q5_K_M: attn_v and ffn_down are Q6_K on the layers use_more_bits picks (the
//     first and last eighth, and every third between); a 70B-shaped model's other attn_v are
//     Q5_K (8 query heads share each);
//   - a type whose blocks do not divide the rows falls back as llama.cpp's does (Q4_K → Q5_0,
//     Q5_K → Q5_1, Q6_K → Q8_0; F16 when even that does not divide).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tandem {

// The llama.cpp file types tandem writes; the values are general.file_type's.
enum class GgufFileType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 7,
  Q4_K_M = 15,
  Q5_K_M = 17,
  Q6_K = 18,
};

// "Q4_K_M" → Q4_K_M (case-insensitive); nullopt for a name tandem does not write.
std::optional<GgufFileType> gguf_file_type_from_name(std::string_view name);
std::string_view gguf_file_type_name(GgufFileType t);
// The names gguf_file_type_from_name accepts, for messages.
constexpr std::string_view kGgufFileTypes = "Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, F16, F32";

// What the choice depends on besides the tensor.
struct GgufPlanModel {
  std::string arch;  // general.architecture
  int num_layers = 0;
  int num_heads = 0, num_kv_heads = 0;
  bool tied = false;  // no output.weight: token_embd is also the output
};

// The type of the tensor `name` (a GGUF name: "blk.3.attn_v.weight") of row-major `shape`.
DType gguf_tensor_type(GgufFileType file, const GgufPlanModel& model, std::string_view name,
                       const Shape& shape);

}  // namespace tandem
