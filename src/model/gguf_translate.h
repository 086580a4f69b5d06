// A GGUF model in tandem's terms. llama.cpp's files describe the same networks tandem's
// architectures implement, in other words: the metadata becomes the config.json a Hugging
// Face folder of the model would hold, and every tensor answers to the Hugging Face name
// the architecture's weight map expects (undoing what llama.cpp's converter changed: the
// llama architecture's Q/K row order, Gemma's norms stored as 1 + w). So ModelConfig::parse
// validates a GGUF config exactly as a config.json (every architecture-specific field, every
// error path shared), and the model classes load either format without knowing which.
//
// Supported general.architecture values: llama (Mixtral's experts included: model_type
// "mixtral"), qwen2, qwen3, qwen3moe, gemma2, gemma3 (text), phi3. Anything else — another
// architecture, a missing key, a tensor tandem would not use — is a tandem::Error naming the
// file and the key or tensor.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loader/gguf_alias.h"
#include "loader/gguf_model.h"

namespace tandem {

struct GgufTranslation {
  nlohmann::json config;  // as config.json would hold it
  // Llama 3's RoPE scaling, which GGUF stores only as the rope_freqs tensor: inv_freq[i] is
  // divided by divisor[i] ([rotary_dim / 2]); empty: none.
  std::vector<float> rope_freq_divisors;
  std::map<std::string, GgufAlias> aliases;  // Hugging Face tensor name -> GGUF tensor
};

GgufTranslation translate_gguf(const GgufModel& model);

// The Hugging Face model_type of a GGUF model ("llama", "mixtral", "qwen3_moe", ...), or an
// error naming general.architecture when tandem does not serve it.
std::string gguf_model_type(const GgufModel& model);

// Blocks the file holds tensors for: 1 + the largest N of a "blk.N." tensor name (0 when
// none). What general block_count is checked against before anything per layer is built.
int64_t gguf_tensor_blocks(const GgufModel& model);

// The tensor name map of translate_gguf (gguf_names.cpp), given the model's config.
std::map<std::string, GgufAlias> gguf_tensor_aliases(const GgufModel& model,
                                                     const nlohmann::json& config);

}  // namespace tandem
