// Gemma 4 text models for `tandem random-model`: the presets' configs and the tensors of
// a gemma4_text checkpoint (the names and per-layer shapes model/arch/gemma4 loads).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>

#include "loader/safetensors_writer.h"
#include "model/config.h"

namespace tandem::cli {

// "gemma-4-e4b", "gemma-4-12b", "gemma-4-26b-a4b"; nullopt for any other name.
std::optional<nlohmann::json> gemma4_preset(const std::string& name);
inline constexpr const char* kGemma4Presets = "gemma-4-e4b, gemma-4-12b, gemma-4-26b-a4b";

// Adds every tensor a Gemma 4 text checkpoint of config `c` (model_type gemma4_text) holds:
// matrices N(0, 1/fan_in), norms, scales and layer scalars 1 (Gemma 4 norms scale by w).
void add_gemma4_tensors(SafetensorsWriter& w, ModelConfig c, DType dtype, uint64_t seed);

}  // namespace tandem::cli
