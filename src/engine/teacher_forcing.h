// Teacher-forced logits: every position's next-token logits for a fixed id sequence,
// computed through the same runner and paged KV the engine uses (one row, chunked by
// the token budget). This is what `tandem logits` and `tandem perplexity` report.
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/tp_ranks.h"
#include "media/image_input.h"
#include "model/model.h"

namespace tandem {

// Host f32 [ids.size(), vocab]. `chunk` tokens per forward step (0 = all at once; a step
// never ends inside an image); `lora_slot`: the adapter slot the row adds (0: the base
// model; lora/lora_slots.h); `media`: the images of `ids` (media/image_input.h).
Tensor teacher_forced_logits(Model& model, Backend& backend, std::span<const int32_t> ids,
                             int chunk = 0, int block_size = 16, int lora_slot = 0,
                             std::span<const MediaSpan> media = {});
// The same through the ranks of a tensor-parallel group (engine/tp_ranks.h): every rank
// runs every chunk, rank 0's gathered logits are returned. Each rank encodes `media` with
// its own (whole) vision tower (docs/tensor-parallel.md).
Tensor teacher_forced_logits(TpRanks& ranks, std::span<const int32_t> ids, int chunk = 0,
                             int block_size = 16, int lora_slot = 0,
                             std::span<const MediaSpan> media = {});

}  // namespace tandem
