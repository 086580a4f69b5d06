#include "backend/sampling.h"

#include <cmath>

#include "core/error.h"

namespace tandem {

namespace {

void check_penalties(const SampleRow& r, size_t row, int64_t vocab, std::string_view op,
                     std::vector<uint8_t>& seen) {
  if (r.output_counts.size() != r.penalty_tokens.size())
    fail("{}: row {}: {} penalty tokens but {} output counts", op, row, r.penalty_tokens.size(),
         r.output_counts.size());
  if (r.penalty_tokens.empty()) return;
  seen.assign(size_t(vocab), 0);
  for (size_t j = 0; j < r.penalty_tokens.size(); j++) {
    int32_t t = r.penalty_tokens[j];
    if (t < 0 || t >= vocab)
      fail("{}: row {}: penalty token {} is outside the vocabulary (0..{})", op, row, t, vocab - 1);
    if (seen[size_t(t)]) fail("{}: row {}: penalty token {} is listed twice", op, row, t);
    seen[size_t(t)] = 1;
    // Counts stay below 2^29 so that frequency · count is exact in double (penalty_offset).
    if (r.output_counts[j] < 0 || r.output_counts[j] >= (1 << 29))
      fail("{}: row {}: output count {} of token {} is out of range", op, row, r.output_counts[j], t);
  }
}

void check_mask(const SampleRow& r, size_t row, int64_t vocab, std::string_view op) {
  if (r.allowed.empty()) return;
  const size_t words = size_t((vocab + 31) / 32);
  if (r.allowed.size() != words)
    fail("{}: row {}: a mask of {} words for a vocabulary of {} tokens (needs {})", op, row,
         r.allowed.size(), vocab, words);
  // Bits past the vocabulary do not count: a mask allowing none of the real tokens would
  // leave the row nothing to pick.
  for (int64_t t = 0; t < vocab; t += 32) {
    uint32_t w = r.allowed[size_t(t >> 5)];
    if (vocab - t < 32) w &= (uint32_t(1) << (vocab - t)) - 1;
    if (w != 0) return;
  }
  fail("{}: row {}: the mask allows no token", op, row);
}

void check_draft(const SampleRow& r, size_t row, int64_t vocab, std::string_view op, int64_t num_q_rows) {
  if (!r.draft) return;
  if (r.draft->token < 0 || r.draft->token >= vocab)
    fail("{}: row {}: draft token {} is outside the vocabulary (0..{})", op, row, r.draft->token, vocab - 1);
  if (r.draft->q_row < 0 || r.draft->q_row >= num_q_rows)
    fail("{}: row {}: draft logits row {} but the op has {}", op, row, r.draft->q_row, num_q_rows);
}

}  // namespace

void check_sample_rows(std::span<const SampleRow> rows, int64_t vocab, std::string_view op,
                       int64_t num_q_rows) {
  if (vocab < 1 || vocab > (int64_t(1) << 24))
    fail("{}: vocabulary of {} tokens is outside 1..2^24", op, vocab);
  std::vector<uint8_t> seen;
  for (size_t i = 0; i < rows.size(); i++) {
    const SampleRow& r = rows[i];
    if (!std::isfinite(r.temperature))
      fail("{}: row {}: temperature {} is not finite", op, i, r.temperature);
    if (r.top_k < 0) fail("{}: row {}: top_k {} is negative", op, i, r.top_k);
    if (!(r.top_p > 0.f)) fail("{}: row {}: top_p {} must be > 0", op, i, r.top_p);
    if (std::isnan(r.min_p)) fail("{}: row {}: min_p is NaN", op, i);
    if (!(r.repetition_penalty > 0.f) || !std::isfinite(r.repetition_penalty))
      fail("{}: row {}: repetition_penalty {} must be > 0", op, i, r.repetition_penalty);
    if (!std::isfinite(r.presence_penalty) || !std::isfinite(r.frequency_penalty))
      fail("{}: row {}: presence/frequency penalties must be finite", op, i);
    if (r.top_logprobs < -1 || r.top_logprobs > kMaxSampleTopLogprobs)
      fail("{}: row {}: top_logprobs {} is outside -1..{}", op, i, r.top_logprobs,
           kMaxSampleTopLogprobs);
    check_penalties(r, i, vocab, op, seen);
    check_mask(r, i, vocab, op);
    check_draft(r, i, vocab, op, num_q_rows);
  }
}

}  // namespace tandem
