#include "engine/perplexity.h"

#include <cmath>
#include <functional>

#include "core/error.h"
#include "engine/sampler.h"
#include "engine/teacher_forcing.h"

namespace tandem {

namespace {

PerplexityResult perplexity_of(std::span<const int32_t> ids, int window,
                               const std::function<Tensor(std::span<const int32_t>)>& logits_of) {
  TANDEM_CHECK(window >= 2, "perplexity window must be >= 2 (got {})", window);
  PerplexityResult r;
  double total = 0;
  for (size_t start = 0; start + 1 < ids.size(); start += size_t(window)) {
    auto chunk = ids.subspan(start, std::min(ids.size() - start, size_t(window)));
    if (chunk.size() < 2) break;
    Tensor logits = logits_of(chunk);
    int64_t V = logits.cols();
    for (size_t t = 0; t + 1 < chunk.size(); t++) {
      std::span<const float> row(logits.ptr<float>() + int64_t(t) * V, size_t(V));
      total -= token_logprob(row, chunk[t + 1], 0, nullptr);
      r.num_scored++;
    }
  }
  if (r.num_scored == 0) fail("perplexity: need at least 2 tokens (got {})", ids.size());
  r.mean_nll = total / double(r.num_scored);
  r.perplexity = std::exp(r.mean_nll);
  return r;
}

}  // namespace

PerplexityResult perplexity(Model& model, Backend& backend, std::span<const int32_t> ids,
                            int window) {
  return perplexity_of(ids, window, [&](std::span<const int32_t> chunk) {
    return teacher_forced_logits(model, backend, chunk, /*chunk=*/512);
  });
}

PerplexityResult perplexity(TpRanks& ranks, std::span<const int32_t> ids, int window) {
  return perplexity_of(ids, window, [&](std::span<const int32_t> chunk) {
    return teacher_forced_logits(ranks, chunk, /*chunk=*/512);
  });
}

}  // namespace tandem
