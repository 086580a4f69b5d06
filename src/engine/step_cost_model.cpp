#include "engine/step_cost_model.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace tandem {

int StepCostModel::bucket_of(int num_tokens) {
  const unsigned n = unsigned(std::max(num_tokens, 1));
  return std::min(int(std::bit_width(n - 1)), kBuckets - 1);  // 1 → 0, 2 → 1, 3..4 → 2, ...
}

void StepCostModel::observe(int num_tokens, double seconds) {
  if (num_tokens <= 0 || !(seconds >= 0)) return;
  Bucket& b = buckets_[size_t(bucket_of(num_tokens))];
  if (b.samples <= 1) {  // the first (a warm-up) is replaced by the second
    b.tokens = num_tokens;
    b.seconds = seconds;
  } else {
    b.tokens += kWeight * (num_tokens - b.tokens);
    b.seconds += kWeight * (seconds - b.seconds);
  }
  b.samples++;
}

int StepCostModel::samples(int num_tokens) const {
  return buckets_[size_t(bucket_of(num_tokens))].samples;
}

std::optional<StepCostModel::Point> StepCostModel::largest_below(double tokens) const {
  std::optional<Point> top;
  for (const Bucket& b : buckets_)
    if (b.samples >= 2 && b.tokens < tokens && (!top || b.tokens > top->tokens))
      top = Point{b.tokens, b.seconds};
  return top;
}

std::optional<StepCostModel::Point> StepCostModel::largest() const {
  return largest_below(std::numeric_limits<double>::infinity());
}

std::optional<double> StepCostModel::cost(int num_tokens) const {
  // Buckets hold disjoint, ascending token ranges and each average stays inside its range,
  // so the measured buckets around num_tokens are the nearest ones on either side of its
  // own bucket (which may hold an average on either side of num_tokens). The engine asks
  // this up to a thousand times a step at 256 rows (SpecController::pick).
  const int at = bucket_of(num_tokens);
  const auto measured = [&](int i) { return buckets_[size_t(i)].samples >= 2; };
  const Bucket* below = nullptr;  // the measured bucket with the most tokens <= num_tokens
  const Bucket* above = nullptr;  // the measured bucket with the fewest tokens > num_tokens
  const Bucket& own = buckets_[size_t(at)];
  if (measured(at)) (own.tokens <= num_tokens ? below : above) = &own;
  for (int i = at - 1; !below && i >= 0; i--)
    if (measured(i)) below = &buckets_[size_t(i)];
  for (int i = at + 1; !above && i < kBuckets; i++)
    if (measured(i)) above = &buckets_[size_t(i)];
  if (!below && !above) return std::nullopt;
  if (!above) return below->seconds;
  if (!below) return above->seconds;
  const double t = (num_tokens - below->tokens) / (above->tokens - below->tokens);
  return below->seconds + t * (above->seconds - below->seconds);
}

}  // namespace tandem
