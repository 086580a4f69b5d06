// Writing a PEFT adapter into one slot of a model's LoRA banks (lora_targets.h), and
// erasing it. Check, then commit: every module of the adapter is matched to a shard of a
// target, its shapes and rank checked, and the slot's whole contents built on the host
// (LoraSlotImage) before any bank is written, so a refused adapter leaves the slot as it
// was. Targets the adapter does not touch get zeros in its slot, so installing an image
// overwrites whatever adapter held the slot before. The two halves run on different
// threads when adapters are loaded at run time: the image off the engine thread (it reads
// only the targets' shapes, fixed at load), the install between two steps.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "model/lora/lora_targets.h"
#include "model/lora/peft_adapter.h"

namespace tandem {

// One slot's contents for every target, on the host in the banks' dtype: A [R, K] and
// B [N, R] padded to the bank's rank, the scaling folded into B (backend/linear.h's
// invariants).
struct LoraSlotImage {
  std::vector<Tensor> a, b;  // [targets.targets.size()] each
};

// Throws tandem::Error naming the adapter's folder and the module that does not fit
// (unknown to the model, wrong shape, rank above the capacity's max_rank).
LoraSlotImage lora_slot_image(const LoraTargets& targets, const PeftAdapter& adapter);
// Copies `image` into slot `slot` (1..max_loras) of every bank, in stream order.
void install_lora_slot(Backend& backend, const LoraTargets& targets, int slot,
                       const LoraSlotImage& image);
// Both: lora_slot_image, then install_lora_slot.
void write_lora_slot(Backend& backend, const LoraTargets& targets, int slot,
                     const PeftAdapter& adapter);
// Zeros slot `slot` of every bank.
void clear_lora_slot(Backend& backend, const LoraTargets& targets, int slot);

}  // namespace tandem
