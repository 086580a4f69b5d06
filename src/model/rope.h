// RoPE frequencies per HF's definitions (transformers modeling_rope_utils): the config's
// rope_type becomes inverse frequencies and an attention factor once, at load time.
#pragma once

#include "backend/backend.h"

namespace tandem {

struct RopeConfig;  // model/config.h

// head_dim is the layer's head dim; max_position_embeddings is the config's.
RopeSpec make_rope(const RopeConfig& rope, int head_dim, int max_position_embeddings);

}  // namespace tandem
