// Builders of the architectures in the registry, one file each in this folder.
#pragma once

#include "model/decoder.h"
#include "model/registry.h"

namespace tandem::arch {

std::unique_ptr<Model> build_llama(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_qwen2(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_qwen3(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_mistral(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_phi3(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_gemma2(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_gemma3(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_qwen3_moe(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_mixtral(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_gemma4(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_gemma3n(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_minicpm(ModelConfig c, const Checkpoint& ck, Backend& be);
// Multimodal folders: the text model and its vision tower (Gemma 3n: text only).
std::unique_ptr<Model> build_gemma3_multimodal(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_gemma3n_multimodal(ModelConfig c, const Checkpoint& ck, Backend& be);
std::unique_ptr<Model> build_gemma4_multimodal(ModelConfig c, const Checkpoint& ck, Backend& be);
// MiniCPM's three μP scalings from its config (arch/minicpm.cpp).
DecoderTraits minicpm_traits(const ModelConfig& c);

}  // namespace tandem::arch
