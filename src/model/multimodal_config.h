// Multimodal Gemma folders as published: config.json's model_type is gemma3, gemma3n or
// gemma4; the text model is under `text_config` (often sparse: HF fills the rest from its
// text config class's defaults), the vision tower under `vision_config`, the image token
// ids at the top level. ModelConfig::parse reads such a file as its text model's config
// (text_model_config) and keeps the whole file for the towers (ModelConfig::multimodal_raw).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace tandem {

// Whether `j` is a multimodal config.json (it has a text_config object).
bool is_multimodal_config(const nlohmann::json& j);

// The text model's config.json as a text-only folder would hold it: the text config
// class's defaults (Gemma3TextConfig, Gemma4TextConfig), then the top-level fields it
// inherits when text_config lacks them (dtype, quantization_config, eos/bos/pad ids), then
// text_config itself; model_type the text model's ("gemma3_text", ...). Gemma 3's
// layer_types are derived from sliding_window_pattern when absent, as HF does. Throws
// tandem::Error for a multimodal model_type tandem does not read.
nlohmann::json text_model_config(const nlohmann::json& j, const std::string& src);

}  // namespace tandem
