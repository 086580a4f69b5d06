// Which model a request's "model" field selects: a LoRA adapter the engine serves (by the
// name it was loaded under; GenerationRequest::lora keeps it) or the base model. The one
// place that decides; the parsers only copy the field into GenerationRequest::lora.
#pragma once

#include "engine/engine_api.h"

namespace tandem::server {

// Leaves request.lora set unless it is the base model's name (the engine's model_info().name,
// which runs the base model). Names neither serves were refused before
// (accepts_model_name); one that was an adapter then and is unloaded now stays set, and
// the engine refuses the request.
void select_model(const EngineApi& engine, GenerationRequest& request);

}  // namespace tandem::server
