// A Hugging Face model (llama, mistral, qwen2, qwen3; mixtral and qwen3_moe, their experts
// stacked per layer as ffn_{gate,up,down}_exps [E, N, K]) written as the GGUF file llama.cpp's
// convert_hf_to_gguf.py + llama-quantize would make of it, for `tandem quantize --gguf` and
// `tandem random-model --gguf`:
//   - metadata: the architecture's keys (llama for llama and mistral), general.file_type, the
//     tokenizer (tokenizer/gguf_vocab_writer.h);
//   - tensors under llama.cpp's names, token_embd first, then the layers, output_norm, output
//     (left out when the embedding is tied); Llama 3 scaling as the rope_freqs tensor; the llama
//     architecture's attn_q / attn_k rows permuted as convert_hf_to_gguf.py's permute (llama.cpp
//     rotates adjacent pairs);
//   - each tensor in the type gguf_tensor_type picks (loader/gguf_quant_plan.h), quantized by
//     quantize_row (core/block_quant.h) on ThreadPool::global().
// The tensors come from sources that produce f32 rows on demand, and the file is streamed
// (GgufWriter's RowFill): a few chunks of rows are in memory at any time, whatever the model's
// size.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tensor.h"
#include "loader/checkpoint.h"
#include "loader/gguf_quant_plan.h"
#include "model/config.h"

namespace tandem::cli {

// One tensor in Hugging Face naming and layout (row-major `shape`, rows = all dims but the
// last). rows(dst, first, count) writes rows [first, first + count) as f32; it may use
// ThreadPool::global() (it is never called from inside a parallel_for).
struct HfTensorSource {
  std::string name;
  Shape shape;
  std::function<void(float* dst, int64_t first, int64_t count)> rows;
};

// The GGUF name of a Hugging Face tensor of these architectures
// ("model.layers.3.mlp.down_proj.weight" → "blk.3.ffn_down.weight"); throws naming a tensor it has
// no name for.
std::string gguf_tensor_name(const std::string& hf_name);
// What gguf_tensor_type needs to know of the model `c` (GGUF architecture name included).
GgufPlanModel gguf_plan_model(const ModelConfig& c);
// Llama 3 scaling as GGUF stores it (the rope_freqs tensor): one divisor per rotary pair.
std::vector<float> llama3_rope_divisors(const RopeConfig& rope, int head_dim);

// The tensors of a safetensors folder (the checkpoint must outlive the sources).
std::vector<HfTensorSource> checkpoint_sources(const Checkpoint& ck);

// Writes `out` for the model of `config` (its config.json) whose tensors are `tensors`, with the
// tokenizer of `tokenizer_dir`; `name` is general.name. Returns the tensor bytes written.
uint64_t write_gguf_model(const nlohmann::json& config, const std::string& name,
                          const std::filesystem::path& tokenizer_dir,
                          const std::vector<HfTensorSource>& tensors, GgufFileType type,
                          const std::filesystem::path& out);

}  // namespace tandem::cli
