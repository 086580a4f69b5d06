#include "server/common/latency_window.h"

#include <algorithm>
#include <cmath>

namespace tandem::server {

LatencyWindow::LatencyWindow(std::chrono::seconds window, Clock::time_point start)
    : window_(std::max(window, std::chrono::seconds(1))), start_(start) {
  slots_.resize(size_t(window_.count()));
  for (Slot& s : slots_) s.counts.assign(kNumBins, 0);
}

int LatencyWindow::bin_of(double seconds) {
  if (!(seconds >= kMinSeconds)) return 0;  // also NaN
  double b = std::floor(std::log(seconds / kMinSeconds) / std::log(kBinRatio)) + 1;
  return int(std::min(b, double(kNumBins - 1)));
}

double LatencyWindow::value_of(int bin) {
  if (bin <= 0) return kMinSeconds;
  return kMinSeconds * std::pow(kBinRatio, double(bin - 1) + 0.5);
}

int64_t LatencyWindow::second_of(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::seconds>(t - start_).count();
}

void LatencyWindow::observe(double seconds, Clock::time_point now) {
  int64_t second = second_of(now);
  int bin = bin_of(seconds);
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_[size_t(second % window_.count())];
  if (slot.second != second) {
    std::fill(slot.counts.begin(), slot.counts.end(), 0u);
    slot.second = second;
  }
  ++slot.counts[size_t(bin)];
}

LatencyWindow::Summary LatencyWindow::summary(Clock::time_point now) const {
  int64_t second = second_of(now);
  std::vector<uint64_t> counts(kNumBins, 0);
  uint64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slot& slot : slots_) {
      if (!slot.second || *slot.second <= second - window_.count() || *slot.second > second)
        continue;
      for (int b = 0; b < kNumBins; ++b) counts[size_t(b)] += slot.counts[size_t(b)];
    }
  }
  for (uint64_t c : counts) total += c;
  Summary s;
  s.count = total;
  if (total == 0) return s;
  // Nearest rank: the q-quantile is the smallest value with at least ceil(q·n) at or below it.
  auto quantile = [&](double q) {
    uint64_t rank = std::max<uint64_t>(1, uint64_t(std::ceil(q * double(total))));
    uint64_t running = 0;
    for (int b = 0; b < kNumBins; ++b)
      if ((running += counts[size_t(b)]) >= rank) return value_of(b);
    return value_of(kNumBins - 1);
  };
  s.p50 = quantile(0.50);
  s.p90 = quantile(0.90);
  s.p99 = quantile(0.99);
  return s;
}

}  // namespace tandem::server
