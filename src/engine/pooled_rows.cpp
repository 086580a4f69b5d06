#include "engine/pooled_rows.h"

#include <algorithm>

#include "core/error.h"
#include "engine/sequence.h"

namespace tandem {

std::optional<std::string> pooling_refusal(const GenerationRequest& r) {
  if (!r.pooling) return std::nullopt;
  if (r.max_tokens != 0)
    return fmt::format("an embedding request generates nothing: max_tokens must be 0 (got {})",
                       r.max_tokens);
  if (r.grammar) return std::string("an embedding request takes no grammar");
  if (r.thinking) return std::string("an embedding request does not think");
  if (r.prompt_logprobs) return std::string("an embedding request returns no prompt logprobs");
  return std::nullopt;
}

PositionRange positions_to_pool(const Sequence& seq) {
  return seq.pooling ? seq.pooling->owed() : PositionRange{};
}

void receive_pooled_runs(const std::vector<ScheduledRow>& rows,
                         const std::vector<std::vector<float>>& runs) {
  size_t next = 0;
  for (const ScheduledRow& r : rows) {
    Sequence& seq = *r.seq;
    const PositionRange owed = positions_to_pool(seq);
    const int begin = std::max(owed.begin, seq.num_computed);
    const int end = std::min(owed.end, seq.num_computed + r.num_tokens);
    if (begin >= end) continue;
    // A prefix hit never passes the first owed position (Sequence::first_wanted_logits),
    // so the runs of a sequence follow one another.
    TANDEM_CHECK(begin == owed.begin, "sequence {}: pools from position {}, owes from {}", seq.id,
                 begin, owed.begin);
    TANDEM_CHECK(next < runs.size(), "{} pooled runs for more rows", runs.size());
    seq.pooling->add(runs[next++], end - begin);
  }
  TANDEM_CHECK(next == runs.size(), "{} pooled runs for {} rows that pool", runs.size(), next);
}

}  // namespace tandem
