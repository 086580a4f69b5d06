// Builders of the architectures in the registry, one file each in this folder.
#pragma once

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

}  // namespace tandem::arch
