// Writing a PEFT adapter into one slot of a model's LoRA banks (lora_targets.h), and
// erasing it. Check, then commit: every module of the adapter is matched to a shard of a
// target, its shapes and rank checked, before any bank is written, so a refused adapter
// leaves the slot as it was. Targets the adapter does not touch get zeros in its slot.
#pragma once

#include "backend/backend.h"
#include "model/lora/lora_targets.h"
#include "model/lora/peft_adapter.h"

namespace tandem {

// Throws tandem::Error naming the adapter's folder and the module that does not fit
// (unknown to the model, wrong shape, rank above the capacity's max_rank).
void write_lora_slot(Backend& backend, const LoraTargets& targets, int slot,
                     const PeftAdapter& adapter);
// Zeros slot `slot` of every bank.
void clear_lora_slot(Backend& backend, const LoraTargets& targets, int slot);

}  // namespace tandem
