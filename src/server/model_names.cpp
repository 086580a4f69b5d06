#include "server/model_names.h"

namespace tandem::server {

void select_model(const EngineApi& engine, GenerationRequest& request) {
  if (!request.lora) return;
  for (auto& [name, dir] : engine.lora_adapters())
    if (name == *request.lora) return;
  request.lora.reset();
}

}  // namespace tandem::server
