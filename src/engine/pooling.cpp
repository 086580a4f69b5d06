#include "engine/pooling.h"

#include "core/error.h"

namespace tandem {

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::Last:
      return "last";
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
  }
  return "last";
}

std::optional<Pooling> pooling_from_name(std::string_view name) {
  for (Pooling p : {Pooling::Last, Pooling::Mean, Pooling::Cls})
    if (name == pooling_name(p)) return p;
  return std::nullopt;
}

PositionRange pooled_positions(Pooling p, int num_prompt) {
  TANDEM_CHECK(num_prompt >= 1, "pooling an empty prompt");
  switch (p) {
    case Pooling::Last:
      return {num_prompt - 1, num_prompt};
    case Pooling::Cls:
      return {0, 1};
    case Pooling::Mean:
      return {0, num_prompt};
  }
  return {num_prompt - 1, num_prompt};
}

PoolingState::PoolingState(Pooling kind, int num_prompt)
    : kind_(kind), range_(pooled_positions(kind, num_prompt)) {}

void PoolingState::add(std::span<const float> run_sum, int count) {
  TANDEM_CHECK(count > 0 && count <= owed().size(), "pooling {} positions, {} are owed", count,
               owed().size());
  if (sum_.empty()) sum_.assign(run_sum.size(), 0.0);
  TANDEM_CHECK(run_sum.size() == sum_.size(), "a pooled run of {} values, the sum has {}",
               run_sum.size(), sum_.size());
  for (size_t i = 0; i < sum_.size(); i++) sum_[i] += double(run_sum[i]);
  num_pooled_ += count;
}

std::vector<float> PoolingState::vector() const {
  TANDEM_CHECK(done() && !sum_.empty(), "the pooled vector of an unfinished pooling");
  const double n = double(range_.size());
  std::vector<float> out(sum_.size());
  for (size_t i = 0; i < out.size(); i++) out[i] = float(sum_[i] / n);
  return out;
}

}  // namespace tandem
