// The sampling op's kernels (backend/sampling.h): one launch for all rows, one block per
// row (the host side, cuda_sample_op.cu, packs the rows and brings the results back).
//
// A block runs the whole function for its row over an f32 working copy of the logits:
//   load (bf16 -> f32) with the row's grammar mask applied (-inf for tokens it rules out)
//   and penalties; first token of the sample order (a min over the
//   64-bit sample_order_rank, which is also greedy's answer); then for sampled rows the
//   top-k and top-p cuts as radix selections over the rank (no sort: 8-bit histograms,
//   key bits then id bits, stopping early when a whole bin is taken), the top-p mass being
//   integer (sample_mass) so the selection is exact; then the Gumbel-max draw over the kept
//   tokens (an argmax). Logprobs: logsumexp, and the k best by another radix selection.
// When the step has few rows (a batch-1 decode), the first-in-order scan is done first
// by a wide grid (first_partial_kernel, ~2 waves of blocks) and the row's block only
// merges the chunks' answers: one block alone reads a 128k vocabulary at a single SM's
// bandwidth (~60 us). Rows with only a temperature cost two passes over V; top-k/top-p add up to 7 passes
// each (+1 for the top-p total). The per-token formulas are sample_math.h, shared with the
// CPU twin, so both backends pick the same tokens.
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_sample.cuh"
#include "backend/sample_math.h"

namespace tandem {

namespace {

constexpr int kThreads = 1024;
constexpr int kPartialThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr u64 kNoCut = ~0ull;

struct Scratch {
  u64 hist[kBins];    // radix-select histogram: weight per bin
  u64 reduce[32];     // block_reduce: one partial per warp
  u64 bin_before;     // radix select: weight of the bins before the chosen one
  u64 bin_weight;     //               and of the chosen bin
  int bin;
  int count;          // top-logprobs gather
  u64 top_rank[kMaxSampleTopLogprobs];
};

__device__ inline float to_f32(float x) { return x; }
__device__ inline float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

// Every thread gets op over all threads' v. Safe to call back to back (the leading barrier
// keeps a fast warp from overwriting partials a slow one is still reading).
template <typename V, typename Op>
__device__ V block_reduce(V v, V identity, Op op, Scratch& sh) {
  static_assert(sizeof(V) <= sizeof(u64), "one 8-byte slot per warp");
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  V* slots = reinterpret_cast<V*>(sh.reduce);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = v;
  __syncthreads();
  int lane = int(threadIdx.x & 31);
  v = lane < kWarps ? slots[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// hist[bin] += w for every lane of the warp, one atomic per distinct bin (logits crowd a
// few bins in the top passes; unaggregated shared atomics would serialize). bin == kBins:
// this lane adds nothing. The whole warp must call it.
template <bool kUnit>
__device__ void warp_hist_add(u64* hist, int bin, u64 w) {
  unsigned peers = __match_any_sync(kFullMask, bin);
  u64 sum = 0;
  if (kUnit) {
    sum = u64(__popc(peers));
  } else {
    for (unsigned m = peers; m; m &= m - 1) sum += __shfl_sync(peers, w, __ffs(int(m)) - 1);
  }
  int lane = int(threadIdx.x & 31);
  if (lane == __ffs(int(peers)) - 1 && bin < kBins && sum > 0) atomicAdd(&hist[bin], sum);
}

// Warp 0: the first bin where the running weight reaches `need`; writes bin, bin_before,
// bin_weight. Each lane owns 8 consecutive bins.
__device__ void find_crossing_bin(Scratch& sh, u64 need) {
  int lane = int(threadIdx.x);
  u64 own = 0;
  for (int j = 0; j < 8; j++) own += sh.hist[lane * 8 + j];
  u64 incl = own;
  for (int o = 1; o < 32; o <<= 1) {
    u64 v = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += v;
  }
  unsigned crossing = __ballot_sync(kFullMask, incl >= need);
  // need <= the filtered total, so some lane crosses; the fallback only bounds a bug.
  int owner = crossing ? __ffs(int(crossing)) - 1 : 31;
  if (lane != owner) return;
  u64 before = incl - own;
  int bin = lane * 8 + 7;
  for (int j = 0; j < 8; j++) {
    u64 h = sh.hist[lane * 8 + j];
    if (before + h >= need) {
      bin = lane * 8 + j;
      break;
    }
    before += h;
  }
  sh.bin = bin;
  sh.bin_before = before;
  sh.bin_weight = sh.hist[bin];
}

// The smallest prefix of the sample order, among tokens with in(i), whose weight reaches
// `target` (1 <= target <= their total weight): returns the rank of its last token, so the
// prefix is {i : in(i) && rank(i) <= cut}. Radix selection over the 64-bit rank, 8 bits
// a pass: the 32 key bits, then the id bits (ids < 2^24, so bits 24..31 are always 0).
template <bool kUnit, typename RankFn, typename WeightFn, typename InFn>
__device__ u64 radix_select(int vocab, u64 target, RankFn rank_of, WeightFn weight_of, InFn in,
                            Scratch& sh) {
  constexpr int kShifts[7] = {56, 48, 40, 32, 16, 8, 0};
  u64 prefix = 0, need = target;
  for (int pass = 0; pass < 7; pass++) {
    int shift = kShifts[pass];
    u64 decided = shift >= 56 ? 0ull : ~((1ull << (shift + 8)) - 1);
    for (int b = int(threadIdx.x); b < kBins; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int base = 0; base < vocab; base += kThreads) {
      int i = base + int(threadIdx.x);
      int bin = kBins;
      u64 w = 0;
      if (i < vocab && in(i)) {
        u64 r = rank_of(i);
        if ((r & decided) == prefix) {
          bin = int((r >> shift) & 0xFF);
          if (!kUnit) w = weight_of(i);
        }
      }
      warp_hist_add<kUnit>(sh.hist, bin, w);
    }
    __syncthreads();
    if (threadIdx.x < 32) find_crossing_bin(sh, need);
    __syncthreads();
    prefix |= u64(sh.bin) << shift;
    need -= sh.bin_before;
    // The whole bin is taken: stop, unless it spans several logits and weights are masses
    // (its last tokens may weigh 0 and lie past the token that reaches the target; ties of
    // one logit weigh the same, so from the last key pass on it is safe).
    if (need >= sh.bin_weight && (kUnit || shift <= 32)) return prefix | ((1ull << shift) - 1);
  }
  return prefix;
}

// The first token of the sample order (greedy's token; p_max for the draw).
__device__ int32_t first_in_order(const float* l, int vocab, Scratch& sh) {
  u64 best = kNoCut;
  for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
    u64 r = sample_order_rank(l[i], i);
    best = r < best ? r : best;
  }
  best = block_reduce(best, kNoCut, [](u64 a, u64 b) { return a < b ? a : b; }, sh);
  return int32_t(best & 0xFFFFFFFFull);
}

// The kept token with the largest Gumbel score, lowest id on ties; `first` when none.
__device__ int32_t pick_best(bool found, double best, int32_t best_id, int32_t first,
                             Scratch& sh) {
  if (!__syncthreads_or(found)) return first;
  const double neg_inf = -INFINITY;
  double top = block_reduce(found ? best : neg_inf, neg_inf,
                            [](double a, double b) { return a > b ? a : b; }, sh);
  int32_t id = (found && best == top) ? best_id : INT_MAX;
  return block_reduce(id, INT_MAX, [](int32_t a, int32_t b) { return a < b ? a : b; }, sh);
}

// The tokens the draw keeps (step 4): those ranked at most cut_k and cut_p (top-k and
// top-p; kNoCut: no cut), passing min-p, and always the first of the order.
struct KeptSet {
  const float* l;
  int32_t first;
  float l_max;
  u64 cut_k = kNoCut, cut_p = kNoCut;

  // The token's scaled logit s when kept (NaN scores are never kept).
  __device__ bool keeps(int i, const RowParams& p, double* s) const {
    const u64 r = u64(sample_order_rank(l[i], i));
    if (i != first && (r > cut_k || r > cut_p)) return false;
    *s = scaled_logit(l[i], l_max, p.temperature);
    return !isnan(*s) && (i == first || passes_min_p(*s, p.min_p));
  }
};

__device__ KeptSet kept_set(const float* l, int vocab, const RowParams& p, int32_t first,
                            Scratch& sh) {
  KeptSet k{l, first, l[first]};
  const float l_max = k.l_max, temperature = p.temperature;
  auto rank_of = [l](int i) { return u64(sample_order_rank(l[i], i)); };
  auto mass_of = [l, l_max, temperature](int i) {
    return u64(sample_mass(scaled_logit(l[i], l_max, temperature)));
  };
  if (p.top_k > 0 && p.top_k < vocab)
    k.cut_k = radix_select<true>(
        vocab, u64(p.top_k), rank_of, mass_of, [](int) { return true; }, sh);
  if (p.top_p < 1.f) {
    const u64 cut_k = k.cut_k;
    auto in_k = [rank_of, cut_k](int i) { return rank_of(i) <= cut_k; };
    u64 total = 0;
    for (int i = int(threadIdx.x); i < vocab; i += kThreads)
      if (in_k(i)) total += mass_of(i);
    total = block_reduce(total, 0ull, [](u64 a, u64 b) { return a + b; }, sh);
    k.cut_p = radix_select<false>(vocab, top_p_target(p.top_p, total), rank_of, mass_of, in_k, sh);
  }
  return k;
}

__device__ int32_t draw(const float* l, int vocab, const RowParams& p, int32_t first, Scratch& sh) {
  const KeptSet kept = kept_set(l, vocab, p, first, sh);
  bool found = false;
  double best = 0;
  int32_t best_id = INT_MAX;
  for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
    double s;
    if (!kept.keeps(i, p, &s)) continue;
    double g = gumbel_score(s, p.seed, p.counter, i);
    if (isnan(g)) continue;
    if (!found || g > best || (g == best && i < best_id)) {
      found = true;
      best = g;
      best_id = i;
    }
  }
  return pick_best(found, best, best_id, first, sh);
}

// Σ exp(s_i) over the kept tokens: the draw's distribution is exp(s_i) / that.
__device__ double kept_mass(const KeptSet& kept, int vocab, const RowParams& p, Scratch& sh) {
  double z = 0, s;
  for (int i = int(threadIdx.x); i < vocab; i += kThreads)
    if (kept.keeps(i, p, &s)) z += exp(s);
  return block_reduce(
      z, 0.0, [](double a, double b) { return a + b; }, sh);
}

__device__ double kept_prob(const KeptSet& kept, int i, const RowParams& p, double z) {
  double s;
  return kept.keeps(i, p, &s) ? exp(s) / z : 0.0;
}

// Step 5: the draft's proposal, accepted with probability min(1, p/q) (q from the draft
// logits row `q`, raw: no mask or penalties), else the draw from max(0, p − q); step 4's
// draw when nothing is left of the residual.   l, q [V]
__device__ int32_t check_draft(const float* l, const float* q, int vocab, const RowParams& p,
                               int32_t first, Scratch& sh) {
  const KeptSet target = kept_set(l, vocab, p, first, sh);
  const KeptSet draft = kept_set(q, vocab, p, first_in_order(q, vocab, sh), sh);
  const double zp = kept_mass(target, vocab, p, sh), zq = kept_mass(draft, vocab, p, sh);
  const int32_t d = p.draft_token;
  const double u = philox_uniform(p.seed, p.counter, kAcceptIndex);
  if (u * kept_prob(draft, d, p, zq) < kept_prob(target, d, p, zp)) return d;
  bool found = false;
  double best = 0;
  int32_t best_id = INT_MAX;
  for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
    const double residual = kept_prob(target, i, p, zp) - kept_prob(draft, i, p, zq);
    if (!(residual > 0)) continue;
    const double g = gumbel_score(log(residual), p.seed, p.counter, i);
    if (!found || g > best || (g == best && i < best_id)) {
      found = true;
      best = g;
      best_id = i;
    }
  }
  if (!__syncthreads_or(found)) return draw(l, vocab, p, first, sh);
  return pick_best(found, best, best_id, first, sh);
}

// log_softmax at `token`, and the k best in sample order (k <= 20).
__device__ void write_logprobs(const float* l, int vocab, int k, int32_t first, int32_t token,
                               RowResult& res, Scratch& sh) {
  const double l_max = l[first];
  double sum = 0;
  for (int i = int(threadIdx.x); i < vocab; i += kThreads) sum += exp(double(l[i]) - l_max);
  sum = block_reduce(sum, 0.0, [](double a, double b) { return a + b; }, sh);
  const double log_z = l_max + log(sum);
  int n = k < vocab ? k : vocab;
  if (n > 0) {
    auto rank_of = [l](int i) { return u64(sample_order_rank(l[i], i)); };
    auto all = [](int) { return true; };
    u64 cut = radix_select<true>(vocab, u64(n), rank_of, rank_of, all, sh);
    if (threadIdx.x == 0) sh.count = 0;
    __syncthreads();
    for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
      u64 r = rank_of(i);
      if (r > cut) continue;
      int slot = atomicAdd(&sh.count, 1);
      if (slot < kMaxSampleTopLogprobs) sh.top_rank[slot] = r;
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  res.logprob = float(double(l[token]) - log_z);
  res.num_top = n;
  for (int a = 1; a < n; a++)  // insertion sort of at most 20 ranks
    for (int b = a; b > 0 && sh.top_rank[b] < sh.top_rank[b - 1]; b--) {
      u64 t = sh.top_rank[b];
      sh.top_rank[b] = sh.top_rank[b - 1];
      sh.top_rank[b - 1] = t;
    }
  for (int a = 0; a < n; a++) {
    int32_t id = int32_t(sh.top_rank[a] & 0xFFFFFFFFull);
    res.top_tokens[a] = id;
    res.top_logprobs[a] = float(double(l[id]) - log_z);
  }
}

// The first token of the sample order within chunk y of row x, over the raw logits:
// partial[x · C + y] (C = gridDim.y). A few rows alone cannot fill the GPU, so the scan
// that greedy rows need is spread over many blocks first.   logits [S, V]
template <typename T>
__global__ void __launch_bounds__(kPartialThreads)
    first_partial_kernel(const T* logits, int vocab, int chunk, u64* partial) {
  __shared__ u64 warp_best[kPartialThreads / 32];
  const T* row = logits + size_t(blockIdx.x) * size_t(vocab);
  const int begin = int(blockIdx.y) * chunk, end = min(vocab, begin + chunk);
  u64 best = kNoCut;
  for (int i = begin + int(threadIdx.x); i < end; i += kPartialThreads) {
    const u64 r = sample_order_rank(to_f32(row[i]), i);
    best = r < best ? r : best;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const u64 other = __shfl_xor_sync(kFullMask, best, o);
    best = other < best ? other : best;
  }
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kPartialThreads / 32; w++) best = warp_best[w] < best ? warp_best[w] : best;
    partial[size_t(blockIdx.x) * gridDim.y + blockIdx.y] = best;
  }
}

// One block per row.   logits [S, V] (bf16 or f32; may be `work` itself when f32),
// work [S, V] f32, params [S], penalty_tokens/penalty_offsets [P], masks (the words of
// constrained rows), results [S]; partial [S, num_partials] from first_partial_kernel, or
// null (scan here).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sample_kernel(const T* logits, float* work, int vocab, const RowParams* params,
                  const int32_t* penalty_tokens, const float* penalty_offsets,
                  const uint32_t* masks, const float* q_logits, const u64* partial,
                  int num_partials, RowResult* results) {
  __shared__ Scratch sh;
  const RowParams p = params[blockIdx.x];
  const T* src = logits + size_t(blockIdx.x) * size_t(vocab);
  float* l = work + size_t(blockIdx.x) * size_t(vocab);
  const uint32_t* mask = p.masked ? masks + p.mask_begin : nullptr;
  // Step 0 before anything reads the logits: each thread reads and writes only its own
  // elements, so an f32 row is masked in place safely.
  if (static_cast<const void*>(src) != static_cast<const void*>(l) || mask)
    for (int i = int(threadIdx.x); i < vocab; i += kThreads) {
      const bool allowed = !mask || (mask[i >> 5] >> (i & 31) & 1u);
      l[i] = allowed ? to_f32(src[i]) : -INFINITY;
    }
  __syncthreads();
  for (int j = p.penalty_begin + int(threadIdx.x); j < p.penalty_end; j += kThreads) {
    int32_t t = penalty_tokens[j];  // distinct within the row: no two threads share a token
    l[t] = penalized_logit(l[t], p.repetition, penalty_offsets[j]);
  }
  __syncthreads();
  int32_t first;
  // The wide scan read the raw logits: of no use once penalties or a mask changed them.
  if (partial == nullptr || p.penalty_end > p.penalty_begin || mask) {
    first = first_in_order(l, vocab, sh);
  } else {
    u64 best = kNoCut;
    for (int c = int(threadIdx.x); c < num_partials; c += kThreads) {
      const u64 r = partial[size_t(blockIdx.x) * size_t(num_partials) + size_t(c)];
      best = r < best ? r : best;
    }
    best = block_reduce(best, kNoCut, [](u64 a, u64 b) { return a < b ? a : b; }, sh);
    first = int32_t(best & 0xFFFFFFFFull);
  }
  int32_t token = first;
  if (p.temperature > 0.f && p.drafted)
    token = check_draft(l, q_logits + size_t(p.q_row) * size_t(vocab), vocab, p, first, sh);
  else if (p.temperature > 0.f)
    token = draw(l, vocab, p, first, sh);
  RowResult& res = results[blockIdx.x];
  if (p.top_logprobs >= 0) write_logprobs(l, vocab, p.top_logprobs, first, token, res, sh);
  if (threadIdx.x == 0) res.token = token;
}

}  // namespace

void launch_sample(cudaStream_t stream, int num_sms, const Tensor& logits, float* work,
                   const RowParams* params, const int32_t* pen_tokens, const float* pen_offsets,
                   const uint32_t* masks, const float* q_logits, RowResult* results,
                   const std::function<Tensor(int64_t)>& scratch_i32) {
  const int64_t S = logits.dim(0), V = logits.dim(1);
  // Fewer rows than ~2 waves of blocks: the first-in-order scan goes wide first.
  const int64_t chunks = std::clamp<int64_t>((2 * int64_t(num_sms) + S - 1) / S, 1,
                                             (V + kPartialChunk - 1) / kPartialChunk);
  Tensor partial;
  if (chunks > 1) partial = scratch_i32(S * 2 * chunks);  // u64 per chunk
  auto launch = [&](const auto* typed) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(typed)>>;
    u64* part = chunks > 1 ? static_cast<u64*>(partial.data) : nullptr;
    if (part) {
      first_partial_kernel<T><<<dim3(unsigned(S), unsigned(chunks)), kPartialThreads, 0, stream>>>(
          typed, int(V), int((V + chunks - 1) / chunks), part);
      TANDEM_CUDA_LAUNCHED("first_partial_kernel");
    }
    sample_kernel<T><<<unsigned(S), kThreads, 0, stream>>>(typed, work, int(V), params, pen_tokens,
                                                           pen_offsets, masks, q_logits, part,
                                                           int(chunks), results);
    TANDEM_CUDA_LAUNCHED("sample_kernel");
  };
  if (logits.dtype == DType::BF16)
    launch(static_cast<const __nv_bfloat16*>(logits.data));
  else
    launch(static_cast<const float*>(logits.data));
}

}  // namespace tandem
