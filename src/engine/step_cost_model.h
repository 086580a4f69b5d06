// StepCostModel: what a step costs, measured online, as a function of its query tokens
// (all rows' together). Steps are timed as they run (Engine::step); the seconds of steps
// with n tokens go to the bucket of n (1, 2, 3–4, 5–8, ... tokens), an exponential moving
// average of seconds and of tokens. cost(n) interpolates linearly between the measured
// buckets around n; beyond the largest measured one it is that bucket's cost (optimistic,
// so that a size never tried gets tried once and is then known), below the smallest
// that bucket's. Nothing measured: nullopt.
//
// A bucket's first measurement is a warm-up (a shape's first step may touch memory for the
// first time): the bucket counts as measured from its second, which replaces it, and only
// then does the average begin. A step that records a CUDA graph is not charged at all
// (Executor::graphs_recorded): a bucket spans several graph shapes — the decode graphs of
// 160, 192, 224 and 256 rows all fall in 129–256 — so most are recorded long after its
// warm-up, and one capture (tens of ms) would weigh kWeight in its average.
//
// A step's cost depends on more than its tokens (context lengths, sampling, the host's
// share); the buckets average over what the server actually runs, and follow it as it
// changes (each new step weighs kWeight).
#pragma once

#include <array>
#include <optional>

namespace tandem {

class StepCostModel {
 public:
  static constexpr int kBuckets = 24;     // up to 2^23 tokens a step
  static constexpr double kWeight = 0.2;  // of a new measurement in its bucket's average

  void observe(int num_tokens, double seconds);
  std::optional<double> cost(int num_tokens) const;
  // Steps measured in the bucket of `num_tokens`.
  int samples(int num_tokens) const;
  // The measured bucket with the most tokens: its average tokens and seconds.
  struct Point {
    double tokens = 0;
    double seconds = 0;
  };
  std::optional<Point> largest() const;
  // ... with fewer average tokens than `tokens`.
  std::optional<Point> largest_below(double tokens) const;
  // The bucket of `num_tokens` (0 .. kBuckets - 1).
  static int bucket_of(int num_tokens);

 private:
  struct Bucket {
    double tokens = 0;   // average tokens of its steps
    double seconds = 0;  // average seconds of its steps
    int samples = 0;
  };
  std::array<Bucket, kBuckets> buckets_{};
};

}  // namespace tandem
