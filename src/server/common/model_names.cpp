#include "server/common/model_names.h"

namespace tandem::server {

void select_model(const EngineApi& engine, GenerationRequest& request) {
  if (!request.lora) return;
  for (auto& [name, dir] : engine.lora_adapters())
    if (name == *request.lora) return;
  // Any other accepted name is the base model's, or an adapter unloaded since the request
  // was accepted (--enable-lora-runtime-updates): that one stays set and the engine refuses
  // it, rather than the base model answering in the adapter's place.
  if (*request.lora == engine.model_info().name) request.lora.reset();
}

}  // namespace tandem::server
