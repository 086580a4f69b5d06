// Which model a request's "model" field selects: a LoRA adapter the engine serves (by the
// name it was loaded under; GenerationRequest::lora keeps it) or the base model. The one
// place that decides; the parsers only copy the field into GenerationRequest::lora.
#pragma once

#include "engine/engine_api.h"

namespace tandem::server {

// Leaves request.lora set only when it names a served adapter. Any other name (the served
// model name, or one the client made up) runs the base model, as every name did before
// adapters.
void select_model(const EngineApi& engine, GenerationRequest& request);

}  // namespace tandem::server
