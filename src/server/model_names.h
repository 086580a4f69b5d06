// Which model a request's "model" field selects: a LoRA adapter the engine serves (by the
// name it was loaded under; GenerationRequest::lora keeps it) or the base model. The one
// place that decides; the parsers only copy the field into GenerationRequest::lora.
#pragma once

#include "engine/engine_api.h"

namespace tandem::server {

// Leaves request.lora set only when it names a served adapter; the served model name
// runs the base model. (Names neither serves were refused before, accepts_model_name.)
void select_model(const EngineApi& engine, GenerationRequest& request);

}  // namespace tandem::server
