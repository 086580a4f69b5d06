// Paged attention: write_kv stores the step's new K/V in their slots, attention reads each
// row's keys through its block table. Every (token, query head) pair is computed by one
// thread from its own row's cache only, so a row's output is bit-identical whatever other
// rows share the step and whatever the thread count. The cache is f32 or f8_e4m3
// (cpu_kv_cache.h); an f8 cache gives exactly the output of an f32 cache holding the
// same (rounded) values, since only the row reads differ.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_kv_cache.h"
#include "backend/cpu/cpu_vec_math.h"

namespace tandem {

namespace {

// Dot product in two 8-lane accumulators (then a scalar tail): the summation order
// depends only on n.
inline float dot(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  if (i + 8 <= n) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    i += 8;
  }
  __m256 s = _mm256_add_ps(s0, s1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float total = _mm_cvtss_f32(h);
  for (; i < n; i++) total += a[i] * b[i];
  return total;
}

// acc[0, D) += Σ_j w[j] · rows[j][0, D) for j < count, each column adding its terms in
// j order; in registers (64 columns at a time) when D is a multiple of 8.
inline void accumulate_rows(float* acc, const float* w, const float* const* rows, int64_t count,
                            int64_t D) {
  if (D % 8 != 0) {
    for (int64_t j = 0; j < count; j++)
      for (int64_t d = 0; d < D; d++) acc[d] += w[j] * rows[j][d];
    return;
  }
  for (int64_t d0 = 0; d0 < D; d0 += 64) {
    const int64_t lanes = std::min<int64_t>(64, D - d0) / 8;
    __m256 r[8];
    for (int l = 0; l < 8; l++) r[l] = l < lanes ? _mm256_loadu_ps(acc + d0 + 8 * l) : _mm256_setzero_ps();
    for (int64_t j = 0; j < count; j++) {
      const __m256 wj = _mm256_set1_ps(w[j]);
      const float* v = rows[j] + d0;
      for (int l = 0; l < 8; l++)
        if (l < lanes) r[l] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 8 * l), r[l]);
    }
    for (int l = 0; l < lanes; l++) _mm256_storeu_ps(acc + d0 + 8 * l, r[l]);
  }
}

// The cache geometry and step arrays one (token, head) job reads.
struct AttnView {
  const float* q = nullptr;              // [T, Hq, Dh]
  const void* k = nullptr;               // [NB, BS, Hkv, Dh] of the cache dtype
  const void* v = nullptr;               // [NB, BS, Hkv, Dh] of the cache dtype
  float* out = nullptr;                  // [T, Hq, Dh]
  const int32_t* positions = nullptr;    // [T]
  const int32_t* block_table = nullptr;  // [B, max_blocks]
  const int32_t* row_of = nullptr;       // [T]: the row owning each token
  int64_t Hq = 0, Hkv = 0, Dh = 0, BS = 0, max_blocks = 0;
  AttentionParams params;
};

// First key position a query at position p sees: HF's 0 <= p - j < window.
inline int64_t first_key(int64_t p, int window) {
  return window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
}

// Fails unless every token's position lies inside its row's context and every block the
// row's queries read is a real block; runs before the parallel loop (no throws inside it).
void check_attention_step(const StepTensors& step, const KvGroupTensors& kv,
                          const AttentionParams& params, int64_t num_blocks) {
  const int32_t* starts = step.seq_starts.ptr<int32_t>();
  const int32_t* pos = step.positions.ptr<int32_t>();
  const int32_t* ctx = step.context_lens.ptr<int32_t>();
  const int32_t* bt = kv.block_table.ptr<int32_t>();
  const int64_t BS = step.block_size;
  for (int b = 0; b < step.num_rows; b++) {
    if (starts[b] == starts[b + 1]) continue;
    int64_t lo = INT64_MAX, hi = -1;
    for (int t = starts[b]; t < starts[b + 1]; t++) {
      TANDEM_CHECK(pos[t] >= 0 && pos[t] < ctx[b] && pos[t] < kv.max_blocks * BS,
                   "attention: token {} of row {} at position {} is outside its context {} "
                   "(max_blocks {} x block_size {})",
                   t, b, pos[t], ctx[b], kv.max_blocks, BS);
      lo = std::min(lo, first_key(pos[t], params.window));
      hi = std::max<int64_t>(hi, pos[t]);
    }
    for (int64_t blk = lo / BS; blk <= hi / BS; blk++) {
      const int32_t id = bt[b * kv.max_blocks + blk];
      TANDEM_CHECK(id >= 0 && id < num_blocks,
                   "attention: row {} block_table[{}] = {} is outside [0, {})", b, blk, id,
                   num_blocks);
    }
  }
}

// The row owning each token.   [T]
std::vector<int32_t> token_rows(const StepTensors& step) {
  std::vector<int32_t> row_of(static_cast<size_t>(step.num_tokens));
  const int32_t* starts = step.seq_starts.ptr<int32_t>();
  for (int b = 0; b < step.num_rows; b++)
    std::fill(row_of.begin() + starts[b], row_of.begin() + starts[b + 1], b);
  return row_of;
}

// One attention score: scaled, then softcapped when cap > 0. (By value: the callers'
// float stores could alias an AttentionParams and force a reload per key.)
inline float score_of(const float* q, const float* k, int64_t Dh, float scale, float cap) {
  float s = dot(q, k, Dh) * scale;
  if (cap > 0.f) s = cap * std::tanh(s / cap);
  return s;
}

// e[i] = exp(e[i] - max_score) for i < n (eight lanes at a time, cpu_vec_math.h); returns
// their sum, added in double in index order.
inline float exp_in_place(float* e, int64_t n, float max_score) {
  double sum = 0;
  int64_t i = 0;
  const __m256 m = _mm256_set1_ps(max_score);
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(e + i, cpu::exp8(_mm256_sub_ps(_mm256_loadu_ps(e + i), m)));
    for (int l = 0; l < 8; l++) sum += e[i + l];
  }
  for (; i < n; i++) {
    e[i] = std::exp(e[i] - max_score);
    sum += e[i];
  }
  return float(sum);
}

// Keys whose value rows one accumulate_rows call takes.
constexpr int64_t kMaxRun = 16;

// Per-thread work space, for up to `heads` query heads at once (attend_group).
struct AttnScratch {
  AttnScratch(int64_t heads, int64_t max_keys, int64_t Dh, bool decodes)
      : scores(size_t(heads * max_keys)),
        row(decodes ? size_t(kMaxRun * Dh) : 0),
        denom(size_t(heads)) {}
  std::vector<float> scores;  // [heads, max_keys]: scores, then their softmax
  std::vector<float> row;     // [kMaxRun, Dh]: decoded cache rows (f8 caches only)
  std::vector<float> denom;   // [heads]: softmax denominators
};

// Calls fn(i0, rows) for the runs of keys lo..p that share a cache block (at most
// kMaxRun of them): rows[i] is the f32 value row of key lo + i0 + i.
template <typename Elem, class Fn>
void for_each_value_run(const AttnView& a, const cpu::KvRows<Elem>& values, const int32_t* bt,
                        int64_t kvh, int64_t lo, int64_t p, float* scratch, Fn fn) {
  const float* rows[kMaxRun];
  for (int64_t j = lo; j <= p;) {
    const int64_t end = std::min({p + 1, (j / a.BS + 1) * a.BS, j + kMaxRun});
    for (int64_t i = 0; i < end - j; i++) {
      const int64_t off = ((int64_t(bt[(j + i) / a.BS]) * a.BS + (j + i) % a.BS) * a.Hkv + kvh) * a.Dh;
      rows[i] = values.row(off, a.Dh, scratch + i * a.Dh);
    }
    fn(j - lo, rows, end - j);
    j = end;
  }
}

// Scaled, softcapped, softmaxed attention of query head h of token t over its row's
// keys, read from a cache of element type Elem.
template <typename Elem>
void attend_one(const AttnView& a, int64_t t, int64_t h, AttnScratch& work) {
  const cpu::KvRows<Elem> keys(a.k), values(a.v);
  float* scratch = work.scores.data();
  float* row = work.row.data();
  const int64_t Dh = a.Dh, kvh = h / (a.Hq / a.Hkv);
  const int64_t p = a.positions[t], lo = first_key(p, a.params.window), n = p - lo + 1;
  const int32_t* bt = a.block_table + int64_t(a.row_of[t]) * a.max_blocks;
  const float* qv = a.q + (t * a.Hq + h) * Dh;
  auto kv_offset = [&](int64_t j) {
    return ((int64_t(bt[j / a.BS]) * a.BS + j % a.BS) * a.Hkv + kvh) * Dh;
  };
  const float scale = a.params.scale, cap = a.params.softcap;
  float max_score = -INFINITY;
  for (int64_t j = lo; j <= p; j++) {
    const float s = score_of(qv, keys.row(kv_offset(j), Dh, row), Dh, scale, cap);
    scratch[j - lo] = s;
    max_score = std::max(max_score, s);
  }
  const float denom = exp_in_place(scratch, n, max_score);
  for (int64_t i = 0; i < n; i++) scratch[i] /= denom;
  float* out = a.out + (t * a.Hq + h) * Dh;
  std::fill(out, out + Dh, 0.f);
  for_each_value_run<Elem>(a, values, bt, kvh, lo, p, row,
                           [&](int64_t i0, const float* const* rows, int64_t count) {
                             accumulate_rows(out, scratch + i0, rows, count, Dh);
                           });
}

// attend_one for the H query heads [h0, h0 + H) of one kv head together, so that each
// cache row is read (and decoded) once for all of them. Each head's arithmetic is
// attend_one's, in the same order, so its output is the same bits.
template <typename Elem>
void attend_group(const AttnView& a, int64_t t, int64_t h0, int64_t H, AttnScratch& work) {
  const cpu::KvRows<Elem> keys(a.k), values(a.v);
  const int64_t Dh = a.Dh, kvh = h0 / (a.Hq / a.Hkv);
  const int64_t p = a.positions[t], lo = first_key(p, a.params.window), n = p - lo + 1;
  const int32_t* bt = a.block_table + int64_t(a.row_of[t]) * a.max_blocks;
  const float* q = a.q + (t * a.Hq + h0) * Dh;  // [H, Dh]
  float* scores = work.scores.data();           // [H, n]
  float* denom = work.denom.data();             // [H]
  auto kv_offset = [&](int64_t j) {
    return ((int64_t(bt[j / a.BS]) * a.BS + j % a.BS) * a.Hkv + kvh) * Dh;
  };
  const float scale = a.params.scale, cap = a.params.softcap;
  for (int64_t j = lo; j <= p; j++) {
    const float* k = keys.row(kv_offset(j), Dh, work.row.data());
    for (int64_t h = 0; h < H; h++)
      scores[h * n + j - lo] = score_of(q + h * Dh, k, Dh, scale, cap);
  }
  for (int64_t h = 0; h < H; h++)
    denom[h] =
        exp_in_place(scores + h * n, n, *std::max_element(scores + h * n, scores + (h + 1) * n));
  for (int64_t h = 0; h < H; h++)
    for (int64_t i = 0; i < n; i++) scores[h * n + i] /= denom[h];
  float* out = a.out + (t * a.Hq + h0) * Dh;  // [H, Dh]
  std::fill(out, out + H * Dh, 0.f);
  for_each_value_run<Elem>(a, values, bt, kvh, lo, p, work.row.data(),
                           [&](int64_t i0, const float* const* rows, int64_t count) {
                             for (int64_t h = 0; h < H; h++)
                               accumulate_rows(out + h * Dh, scores + h * n + i0, rows, count, Dh);
                           });
}

// Every query head of a step of num_tokens tokens over a cache of element type Elem.
// A job is one (token, query head), or for an f8 cache one (token, kv head) with all its
// query heads (attend_group: each cache row decoded once).
template <typename Elem>
void attend_all(ThreadPool& pool, const AttnView& view, int64_t num_tokens, int64_t max_keys) {
  const int64_t Hq = view.Hq, Dh = view.Dh, group = Hq / view.Hkv;
  constexpr bool decodes = !std::is_same_v<Elem, float>;
  // An f8 cache is grouped so each row is decoded once per GQA group (unless that leaves
  // threads idle). An f32 cache is not: per-head jobs measured 1.5x faster at 16 rows x
  // 192 keys (the rows stay in L1/L2 between the heads of a group).
  const bool grouped = decodes && group > 1 && num_tokens * view.Hkv >= 2 * int64_t(pool.num_threads());
  const int64_t heads = grouped ? group : 1, jobs_per_token = Hq / heads;
  cpu::parallel_for(pool, num_tokens * jobs_per_token, 2 * heads * max_keys * Dh,
                    [&](int64_t begin, int64_t end) {
                      AttnScratch work(heads, max_keys, Dh, decodes);
                      for (int64_t i = begin; i < end; i++) {
                        const int64_t t = i / jobs_per_token, h = i % jobs_per_token * heads;
                        if (grouped)
                          attend_group<Elem>(view, t, h, heads, work);
                        else
                          attend_one<Elem>(view, t, h, work);
                      }
                    });
}

}  // namespace

// Writes the step's new K and V into their slots, in the cache's dtype.
//   k, v [T, Hkv, Dh] f32; cache [NB, BS, Hkv, Dh] f32 or f8_e4m3
void CpuBackend::write_kv(PagedKv& cache, const Tensor& k, const Tensor& v,
                          const StepTensors& step) {
  cpu::check_kv_cache(cache, "write_kv");
  cpu::check_tensor(k, DType::F32, "write_kv", "k");
  cpu::check_tensor(v, DType::F32, "write_kv", "v");
  const Tensor& slot_map = step.kv(cache).slot_map;
  cpu::check_tensor(slot_map, DType::I32, "write_kv", "slot_map");
  cpu::check_ndim(cache.k, 4, "write_kv", "cache.k");
  const int64_t T = step.num_tokens, slots = cache.k.dim(0) * cache.k.dim(1);
  const int64_t row = cache.k.dim(2) * cache.k.dim(3);  // Hkv * Dh
  TANDEM_CHECK(cache.k.dim(1) == step.block_size, "write_kv: cache block size {} != step's {}",
               cache.k.dim(1), step.block_size);
  TANDEM_CHECK(k.numel() == T * row && v.numel() == T * row && slot_map.numel() >= T,
               "write_kv: k {} v {} must be [{}, {}, {}] (slot_map {})", k.shape.str(),
               v.shape.str(), T, cache.k.dim(2), cache.k.dim(3), slot_map.shape.str());
  const int32_t* slot = slot_map.ptr<int32_t>();
  for (int64_t t = 0; t < T; t++) {
    TANDEM_CHECK(slot[t] >= 0 && slot[t] < slots, "write_kv: slot {} of token {} outside [0, {})",
                 slot[t], t, slots);
    cpu::store_kv_values(cache.k, slot[t] * row, k.ptr<float>() + t * row, row);
    cpu::store_kv_values(cache.v, slot[t] * row, v.ptr<float>() + t * row, row);
  }
}

// Causal (optionally windowed, softcapped) GQA attention of each new token over its
// row's cached keys.   out, q [T, Hq, Dh] f32; cache [NB, BS, Hkv, Dh] f32 or f8_e4m3
void CpuBackend::attention(Tensor& out, const Tensor& q, const PagedKv& cache,
                           const StepTensors& step, const AttentionParams& params) {
  cpu::check_tensor(out, DType::F32, "attention", "out");
  cpu::check_tensor(q, DType::F32, "attention", "q");
  const DType cache_dtype = cpu::check_kv_cache(cache, "attention");
  cpu::check_ndim(q, 3, "attention", "q");
  cpu::check_ndim(cache.k, 4, "attention", "cache.k");
  cpu::check_step(step, "attention");
  const KvGroupTensors& kv = step.kv(cache);
  cpu::check_kv_addresses(step, kv, "attention");
  const int64_t T = q.dim(0), Hq = q.dim(1), Dh = q.dim(2), Hkv = cache.k.dim(2);
  TANDEM_CHECK(T == step.num_tokens, "attention: q {} vs step with {} tokens", q.shape.str(),
               step.num_tokens);
  TANDEM_CHECK(out.shape == q.shape && out.data != q.data,
               "attention: out {} must be a separate tensor shaped like q {}", out.shape.str(),
               q.shape.str());
  TANDEM_CHECK(
      cache.v.shape == cache.k.shape && cache.k.dim(3) == Dh && cache.k.dim(1) == step.block_size,
      "attention: cache k {} v {} must be [blocks, {}, Hkv, {}]", cache.k.shape.str(),
      cache.v.shape.str(), step.block_size, Dh);
  TANDEM_CHECK(Hkv > 0 && Hq % Hkv == 0, "attention: {} query heads not a multiple of {} kv heads",
               Hq, Hkv);
  check_attention_step(step, kv, params, cache.k.dim(0));

  const std::vector<int32_t> row_of = token_rows(step);
  const int32_t* pos = step.positions.ptr<int32_t>();
  int64_t max_keys = 1;
  for (int64_t t = 0; t < T; t++)
    max_keys = std::max(max_keys, pos[t] - first_key(pos[t], params.window) + 1);

  AttnView view;
  view.q = q.ptr<float>();
  view.k = cache.k.data;
  view.v = cache.v.data;
  view.out = out.ptr<float>();
  view.positions = pos;
  view.block_table = kv.block_table.ptr<int32_t>();
  view.row_of = row_of.data();
  view.Hq = Hq;
  view.Hkv = Hkv;
  view.Dh = Dh;
  view.BS = step.block_size;
  view.max_blocks = kv.max_blocks;
  view.params = params;
  if (cache_dtype == DType::F8E4M3)
    attend_all<uint8_t>(*pool_, view, T, max_keys);
  else
    attend_all<float>(*pool_, view, T, max_keys);
}

}  // namespace tandem
