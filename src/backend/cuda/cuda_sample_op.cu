// The sampling op's host side on CUDA: packs each row's parameters, launches the kernels
// (cuda_sample.cu), and brings the picked ids back. Per step: one H2D copy of the packed
// rows, the kernels, one D2H copy of the results into pinned memory; the host waits for
// that copy only in sample_wait, so the engine can issue the next step first. The
// picked ids stay on the device for feed_tokens (the next step's inputs).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_sample.cuh"

namespace tandem {

namespace {

// Row parameters, penalty lists and grammar masks in one buffer of 4-byte words (see
// RowParams): one upload per step, the masks of constrained rows only.
std::vector<int32_t> pack_rows(std::span<const SampleRow> rows, int64_t* num_penalties,
                               int64_t* num_mask_words) {
  int64_t P = 0, M = 0;
  for (const SampleRow& r : rows) {
    P += int64_t(r.penalty_tokens.size());
    M += int64_t(r.allowed.size());
  }
  cuda_require(P < INT_MAX / 4 && M < INT_MAX / 4, "sample: too many penalty entries or mask words");
  constexpr size_t kRowWords = sizeof(RowParams) / 4;
  std::vector<int32_t> words(rows.size() * kRowWords + size_t(2 * P + M) + 1);
  int32_t* tokens = words.data() + rows.size() * kRowWords;
  float* offsets = reinterpret_cast<float*>(tokens + P);
  int32_t* masks = tokens + 2 * P;
  int32_t at = 0, mask_at = 0;
  for (size_t s = 0; s < rows.size(); s++) {
    const SampleRow& r = rows[s];
    RowParams p{r.temperature,
                r.top_p,
                r.min_p,
                r.repetition_penalty,
                r.top_k,
                r.top_logprobs,
                at,
                at + int32_t(r.penalty_tokens.size()),
                r.seed,
                r.counter,
                r.allowed.empty() ? 0 : 1,
                mask_at,
                r.draft ? 1 : 0,
                r.draft ? r.draft->token : 0,
                r.draft ? r.draft->q_row : 0,
                0};
    std::memcpy(words.data() + s * kRowWords, &p, sizeof(p));
    if (!r.allowed.empty()) {
      std::memcpy(masks + mask_at, r.allowed.data(), r.allowed.size() * 4);
      mask_at += int32_t(r.allowed.size());
    }
    for (size_t j = 0; j < r.penalty_tokens.size(); j++, at++) {
      tokens[at] = r.penalty_tokens[j];
      offsets[at] = r.penalty_offset(j);
    }
  }
  *num_penalties = P;
  *num_mask_words = M;
  return words;
}

void unpack_result(const RowResult& r, int top_logprobs, SampledToken& out) {
  out.token = r.token;
  out.logprob = top_logprobs >= 0 ? r.logprob : 0.f;
  // Tokens a mask (or the logits themselves) rule out rank last at -inf: not candidates.
  int n = top_logprobs > 0 ? r.num_top : 0;
  while (n > 0 && std::isinf(r.top_logprobs[n - 1]) && r.top_logprobs[n - 1] < 0) n--;
  out.top_tokens.assign(r.top_tokens, r.top_tokens + n);
  out.top_logprobs.assign(r.top_logprobs, r.top_logprobs + out.top_tokens.size());
}

// A sampling op in flight: its device results (kept alive for feed_tokens), a pinned
// host copy and the event that fires once the copy has landed. Pinned buffers and events
// are reused through the backend's SamplePool: allocating pinned memory is slow and may
// synchronize the device.
struct SampleSlot {
  RowResult* host = nullptr;  // pinned, `capacity` rows
  int64_t capacity = 0;
  cudaEvent_t copied = nullptr;
  ~SampleSlot() {
    if (copied) cudaEventDestroy(copied);
    if (host) cudaFreeHost(host);
  }
};

}  // namespace

struct SamplePool {
  std::mutex mu;
  std::vector<std::unique_ptr<SampleSlot>> free;

  std::unique_ptr<SampleSlot> take(int64_t rows) {
    std::unique_ptr<SampleSlot> slot;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!free.empty()) {
        slot = std::move(free.back());
        free.pop_back();
      }
    }
    if (!slot) {
      slot = std::make_unique<SampleSlot>();
      cuda_check(cudaEventCreateWithFlags(&slot->copied, cudaEventDisableTiming),
                 "sample: cudaEventCreate");
    }
    if (slot->capacity < rows) {
      if (slot->host) cuda_check(cudaFreeHost(slot->host), "sample: cudaFreeHost");
      slot->host = nullptr;
      slot->capacity = 0;
      const int64_t cap = std::max<int64_t>(rows, 256);
      cuda_check(cudaMallocHost(reinterpret_cast<void**>(&slot->host), size_t(cap) * sizeof(RowResult)),
                 "sample: cudaMallocHost");
      slot->capacity = cap;
    }
    return slot;
  }
  void give(std::unique_ptr<SampleSlot> slot) {
    std::lock_guard<std::mutex> lock(mu);
    free.push_back(std::move(slot));
  }
};

namespace {

// A sampling op's state, or ids another rank picked (picked_ids: no pool, no slot, a
// stride of one word: nothing to wait for).
struct CudaPendingSample {
  std::shared_ptr<SamplePool> pool;
  std::unique_ptr<SampleSlot> slot;
  Tensor results;                 // [S, stride] i32, device; a row's token is its word 0
  int64_t stride = kResultWords;  // words a row
  std::vector<int> top_logprobs;  // per row: what unpacking keeps
  ~CudaPendingSample() {
    if (!slot) return;
    cudaEventSynchronize(slot->copied);  // the copy may still be writing the buffer
    pool->give(std::move(slot));
  }
};

// tokens[dst[i]] = results[src[i]].token   results [S, stride]
__global__ void feed_kernel(int32_t* tokens, const int32_t* pairs, int n, const int32_t* results,
                            int64_t stride) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i < n) tokens[pairs[i]] = results[int64_t(pairs[n + i]) * stride];
}

}  // namespace

void CudaBackend::sample(Tensor& logits, std::span<const SampleRow> rows,
                         std::span<SampledToken> out, const Tensor* draft_logits) {
  PendingSample pending = sample_async(logits, rows, draft_logits);
  sample_wait(pending, out);
}

PendingSample CudaBackend::sample_async(Tensor& logits, std::span<const SampleRow> rows,
                                        const Tensor* draft_logits) {
  cuda_require(logits.device == Device::CUDA, "sample: logits must be on the GPU");
  cuda_require(logits.dtype == DType::BF16 || logits.dtype == DType::F32,
               "sample: logits must be bf16 or f32");
  cuda_require(logits.ndim() == 2, "sample: logits must be [S, V]");
  const int64_t S = logits.dim(0), V = logits.dim(1);
  cuda_require(int64_t(rows.size()) == S, "sample: need one SampleRow per logits row");
  int64_t Q = 0;
  if (draft_logits) {
    cuda_require(draft_logits->device == Device::CUDA && draft_logits->dtype == DType::F32 &&
                     draft_logits->ndim() == 2 && draft_logits->dim(1) == V,
                 "sample: draft logits must be f32 [Q, V] on the GPU");
    Q = draft_logits->dim(0);
  }
  check_sample_rows(rows, V, "sample", Q);  // also bounds V by 2^24 (ids in 24 bits)
  if (!sample_pool_) sample_pool_ = std::make_shared<SamplePool>();
  auto state = std::make_shared<CudaPendingSample>();
  state->pool = sample_pool_;
  for (const SampleRow& r : rows) state->top_logprobs.push_back(r.top_logprobs);
  if (S == 0) return PendingSample{0, state};

  int64_t P = 0, M = 0;
  std::vector<int32_t> words = pack_rows(rows, &P, &M);
  Tensor packed = alloc(DType::I32, {int64_t(words.size())});
  allocator_->write_async(packed.data, words.data(), words.size() * 4);
  const auto* params = static_cast<const RowParams*>(packed.data);
  const int32_t* pen_tokens = packed.ptr<int32_t>() + S * int64_t(sizeof(RowParams) / 4);
  const auto* pen_offsets = reinterpret_cast<const float*>(pen_tokens + P);
  const auto* masks = M > 0 ? reinterpret_cast<const uint32_t*>(pen_tokens + 2 * P) : nullptr;

  // f32 logits are worked on in place (the op may modify them); bf16 ones get an f32 copy,
  // since penalized values must not be rounded to bf16 (the CPU keeps them in f32).
  Tensor work = logits.dtype == DType::F32 ? logits : alloc(DType::F32, {S, V});
  state->results = alloc(DType::I32, {S, kResultWords});
  auto* dev_results = static_cast<RowResult*>(state->results.data);
  const float* q_logits = Q > 0 ? draft_logits->ptr<float>() : nullptr;
  launch_sample(stream_, props_.multiProcessorCount, logits, work.ptr<float>(), params, pen_tokens,
                pen_offsets, masks, q_logits, dev_results,
                [&](int64_t words) { return alloc(DType::I32, {words}); });

  state->slot = sample_pool_->take(S);
  cuda_check(cudaMemcpyAsync(state->slot->host, dev_results, size_t(S) * sizeof(RowResult),
                             cudaMemcpyDeviceToHost, stream_),
             "sample: download results");
  cuda_check(cudaEventRecord(state->slot->copied, stream_), "sample: cudaEventRecord");
  return PendingSample{int(S), state};
}

void CudaBackend::sample_wait(PendingSample& pending, std::span<SampledToken> out) {
  auto* state = static_cast<CudaPendingSample*>(pending.state.get());
  cuda_require(state && int64_t(out.size()) == pending.num_rows,
               "sample_wait: need one output per pending row");
  cuda_require(pending.num_rows == 0 || state->slot != nullptr,
               "sample_wait: ids received from another rank are not a sampling op to wait for");
  if (pending.num_rows > 0) {
    cuda_check(cudaEventSynchronize(state->slot->copied), "sample: wait for results");
    for (size_t s = 0; s < out.size(); s++)
      unpack_result(state->slot->host[s], state->top_logprobs[s], out[s]);
  }
  pending.state.reset();
}

void CudaBackend::feed_tokens(Tensor& tokens, std::span<const int32_t> dst,
                              std::span<const int32_t> src, const PendingSample& from) {
  auto* state = static_cast<const CudaPendingSample*>(from.state.get());
  cuda_require(state != nullptr, "feed_tokens: the sampling op has already been waited for");
  cuda_require(tokens.device == Device::CUDA && tokens.dtype == DType::I32,
               "feed_tokens: tokens must be i32 on the GPU");
  cuda_require(dst.size() == src.size(), "feed_tokens: dst and src differ in length");
  const int n = int(dst.size());
  if (n == 0) return;
  std::vector<int32_t> pairs(dst.begin(), dst.end());
  pairs.insert(pairs.end(), src.begin(), src.end());
  for (int i = 0; i < n; i++)
    cuda_require(dst[size_t(i)] >= 0 && dst[size_t(i)] < tokens.numel() && src[size_t(i)] >= 0 &&
                     src[size_t(i)] < from.num_rows,
                 "feed_tokens: a pair lies outside tokens or the sampled rows");
  Tensor dev_pairs = alloc(DType::I32, {int64_t(pairs.size())});
  allocator_->write_async(dev_pairs.data, pairs.data(), pairs.size() * 4);
  feed_kernel<<<unsigned((n + 127) / 128), 128, 0, stream_>>>(
      tokens.ptr<int32_t>(), dev_pairs.ptr<int32_t>(), n, state->results.ptr<int32_t>(),
      state->stride);
  TANDEM_CUDA_LAUNCHED("feed_kernel");
}

// The token column of the results, one strided copy on the stream (no kernel).
Tensor CudaBackend::sampled_ids(const PendingSample& from) {
  auto* state = static_cast<const CudaPendingSample*>(from.state.get());
  cuda_require(state != nullptr, "sampled_ids: the sampling op has already been waited for");
  Tensor ids = alloc(DType::I32, {int64_t(from.num_rows)});
  if (from.num_rows == 0) return ids;
  cuda_check(cudaMemcpy2DAsync(ids.data, sizeof(int32_t), state->results.data,
                               size_t(state->stride) * sizeof(int32_t), sizeof(int32_t),
                               size_t(from.num_rows), cudaMemcpyDeviceToDevice, stream_),
             "sampled_ids: copy the token column");
  return ids;
}

PendingSample CudaBackend::picked_ids(Tensor ids) {
  cuda_require(ids.device == Device::CUDA && ids.dtype == DType::I32 && ids.ndim() == 1,
               "picked_ids: ids must be [S] i32 on the GPU");
  auto state = std::make_shared<CudaPendingSample>();
  state->stride = 1;
  const int rows = int(ids.numel());
  state->results = std::move(ids);
  return PendingSample{rows, state};
}

}  // namespace tandem
