// Multimodal Gemma 3 for `tandem random-model`: a folder as the Hub publishes
// gemma-3-4b-it / gemma-3-12b-it (config.json with model_type gemma3, text_config and
// vision_config; tensors under language_model.model.*, vision_tower.vision_model.*,
// multi_modal_projector.*; preprocessor_config.json + processor_config.json; a tokenizer
// holding the image tokens at the ids the config names, Gemma 3's chat template), with
// random weights, so image workloads can be measured without a download.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>

#include "loader/safetensors_writer.h"
#include "model/config.h"

namespace tandem::cli {

// "gemma-3-4b", "gemma-3-12b", "gemma-3-vision-tiny" (a few MB, for tests): the config.json
// of a Gemma3ForConditionalGeneration; nullopt for any other name.
std::optional<nlohmann::json> gemma3_preset(const std::string& name);
inline constexpr const char* kGemma3Presets = "gemma-3-4b, gemma-3-12b, gemma-3-vision-tiny";

// Adds every tensor of the multimodal Gemma 3 checkpoint `c` describes (ModelConfig::parse
// of a gemma3 config.json: the text model, the towers in multimodal_raw), in the Hub's
// names. Matrices N(0, 1/fan_in) (so each layer's output stays near unit scale and bf16
// activations stay finite), Gemma's (1 + w) RMSNorm weights 0, SigLIP's LayerNorms 1 / 0,
// biases 0. The matrices stream (SafetensorsWriter::add_chunked).
void add_gemma3_tensors(SafetensorsWriter& w, const ModelConfig& c, DType dtype, uint64_t seed);

// Writes everything but the weights and config.json: tokenizer.json (a byte-level BPE whose
// <pad>/<eos>/<bos> are 0/1/2, <start_of_image>, <end_of_image> and <image_soft_token> at
// the ids the config names, <start_of_turn>/<end_of_turn> right after <end_of_image>, the
// rest of the vocabulary <unusedN>), tokenizer_config.json, chat_template.jinja (Gemma 3's:
// image items as <start_of_image>), generation_config.json, preprocessor_config.json (flat,
// as the Hub has it) and processor_config.json.
void write_gemma3_side_files(const std::filesystem::path& dir, const ModelConfig& c);

}  // namespace tandem::cli
