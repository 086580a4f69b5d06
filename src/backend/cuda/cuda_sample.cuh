// Private to the sampling op's two files: what the kernels read and write, and their
// launcher (cuda_sample.cu); the host side that packs rows, keeps ops in flight and
// feeds picked ids to the next step is cuda_sample_op.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "backend/sampling.h"
#include "core/tensor.h"

namespace tandem {

using u64 = unsigned long long;

constexpr int kPartialChunk = 4096;  // logits per first_partial_kernel block, at least

// SampleRow without its vectors, as the kernel reads it. Uploaded packed, followed by the
// penalty lists of all rows: tokens [P] i32, then offsets [P] f32, then the grammar masks
// of the constrained rows: ceil(V / 32) u32 words each.
struct RowParams {
  float temperature;
  float top_p;
  float min_p;
  float repetition;
  int32_t top_k;
  int32_t top_logprobs;
  int32_t penalty_begin;  // this row's entries are [penalty_begin, penalty_end) of the lists
  int32_t penalty_end;
  u64 seed;
  u64 counter;
  int32_t masked;      // 1: the row has a mask at word mask_begin of the masks; 0: none
  int32_t mask_begin;
  int32_t drafted;  // 1: check the draft model's proposal draft_token (sampling.h, step 5)
  int32_t draft_token;
  int32_t q_row;  // ... drawn from this row of the draft logits
  int32_t unused;
};
static_assert(sizeof(RowParams) == 72, "RowParams is packed into 4-byte words");

struct RowResult {
  int32_t token;
  float logprob;
  int32_t num_top;
  int32_t top_tokens[kMaxSampleTopLogprobs];
  float top_logprobs[kMaxSampleTopLogprobs];
};
static_assert(sizeof(RowResult) % 4 == 0, "RowResult is copied as 4-byte words");

constexpr int64_t kResultWords = sizeof(RowResult) / 4;

// Samples every row of logits [S, V] (bf16 or f32) on `stream`: work [S, V] f32 (may be
// the logits themselves when f32), params [S] and the penalty lists as pack_rows lays
// them out, masks as pack_rows lays them out (null when no row has one), draft logits
// [Q, V] f32 (null when no row checks a proposal), results [S]. `scratch_i32(n)` gives an
// i32 device tensor of n elements that must live until the kernels have run (stream order).
void launch_sample(cudaStream_t stream, int num_sms, const Tensor& logits, float* work,
                   const RowParams* params, const int32_t* pen_tokens, const float* pen_offsets,
                   const uint32_t* masks, const float* q_logits, RowResult* results,
                   const std::function<Tensor(int64_t)>& scratch_i32);

}  // namespace tandem
