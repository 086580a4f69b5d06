// Perplexity of a token stream: the stream is cut into consecutive windows of
// `window` tokens, each run from an empty cache at positions 0..n-1, and every token
// but a window's first is scored. (The protocol of tools/tiny-model/README.md.)
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "engine/tp_ranks.h"
#include "model/model.h"

namespace tandem {

struct PerplexityResult {
  double mean_nll = 0;     // nats per scored token
  double perplexity = 0;   // exp(mean_nll)
  int64_t num_scored = 0;
};

PerplexityResult perplexity(Model& model, Backend& backend, std::span<const int32_t> ids,
                            int window);
// The same through a tensor-parallel group's ranks (engine/tp_ranks.h).
PerplexityResult perplexity(TpRanks& ranks, std::span<const int32_t> ids, int window);

}  // namespace tandem
