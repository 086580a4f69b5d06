// Paged attention: write_kv stores the step's new K/V in their slots, attention reads each
// row's keys through its block table. The work is split into jobs, each the queries of up
// to kJobTokens tokens of one row that share one kv head; a job loads each tile of keys
// and values once for all its queries (cpu_attention_kernels.h says what each query
// computes, which no other query, row or thread changes). The cache is f32 or f8_e4m3
// (cpu_kv_cache.h); f8 rows are decoded to f32 once per tile and job, so an f8 cache gives
// exactly the output of an f32 cache holding the same (rounded) values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_attention_kernels.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_kv_cache.h"

namespace tandem {

namespace {

// Tokens per job: a tile of keys serves up to kJobTokens x (GQA group) queries, and the
// job's output rows (its running sums) stay in L1/L2 while the tiles stream past.
constexpr int64_t kJobTokens = 16;

// The cache geometry and step arrays every job reads.
struct AttnView {
  const float* q = nullptr;              // [T, Hq, Dh]
  const void* k = nullptr;               // [NB, BS, Hkv, Dh] of the cache dtype
  const void* v = nullptr;               // [NB, BS, Hkv, Dh] of the cache dtype
  float* out = nullptr;                  // [T, Hq, Dh]
  const int32_t* positions = nullptr;    // [T]
  const int32_t* ends = nullptr;         // [T] image ends, or null (no query sees past itself)
  const int32_t* block_table = nullptr;  // [B, max_blocks]
  int64_t Hq = 0, Hkv = 0, Dh = 0, BS = 0, max_blocks = 0;
  AttentionParams params;
};

// Tokens [t0, t1) of row `row` against kv head `kvh`; they see keys [lo, hi] between them.
struct AttnJob {
  int32_t row = 0, kvh = 0, t0 = 0, t1 = 0;
  int64_t lo = 0, hi = 0;
  int64_t cost() const { return (t1 - t0) * (hi - lo + 1); }
};

// The tile kernels of one instruction set.
struct AttnKernels {
  void (*tiles)(const cpu::AttnQueries&, const cpu::AttnTile*, int64_t, float*);
  void (*finish)(const cpu::AttnQueries&);
};

AttnKernels kernels_for(CpuIsa isa) {
  if (isa == CpuIsa::Avx512) return {cpu::attend_tiles_avx512, cpu::attend_finish_avx512};
  return {cpu::attend_tiles_avx2, cpu::attend_finish_avx2};
}

// The keys [lo, hi] a query at position p sees: HF's 0 <= p - j < window (causal), and,
// when `end` (its media_ends entry) holds an image's end, the rest of that image.
struct KeyRange {
  int64_t lo = 0, hi = 0;
};
inline KeyRange key_range(int64_t p, int window, const int32_t* end) {
  KeyRange r{window > 0 ? std::max<int64_t>(0, p - window + 1) : 0, p};
  if (end && *end > 0) r.hi = std::max<int64_t>(r.hi, *end - 1);
  return r;
}

// Token t's image end, when the layer lets queries see their image (else null).
inline const int32_t* end_of(const int32_t* ends, int64_t t) {
  return ends ? ends + t : nullptr;
}

// The step's image ends, when this attention widens queries to them: validated (each past
// its token, inside the row's context), else null.
const int32_t* media_ends_for(const StepTensors& step, const AttentionParams& params) {
  if (!params.media_bidirectional || !step.media_ends.defined()) return nullptr;
  cpu::check_tensor(step.media_ends, DType::I32, "attention", "step.media_ends");
  TANDEM_CHECK(step.media_ends.numel() >= int64_t(step.num_tokens),
               "attention: media_ends {} for {} tokens", step.media_ends.shape.str(),
               step.num_tokens);
  const int32_t* ends = step.media_ends.ptr<int32_t>();
  const int32_t* starts = step.seq_starts.ptr<int32_t>();
  const int32_t* pos = step.positions.ptr<int32_t>();
  const int32_t* ctx = step.context_lens.ptr<int32_t>();
  for (int b = 0; b < step.num_rows; b++)
    for (int t = starts[b]; t < starts[b + 1]; t++)
      TANDEM_CHECK(ends[t] == 0 || (pos[t] < ends[t] && ends[t] <= ctx[b]),
                   "attention: token {} of row {} at position {} has its image end at {}, which "
                   "must lie past it and inside the row's context {}",
                   t, b, pos[t], ends[t], ctx[b]);
  return ends;
}

// Fails unless every token's position lies inside its row's context and every block the
// row's queries read is a real block; runs before the parallel loop (no throws inside it).
void check_attention_step(const StepTensors& step, const KvGroupTensors& kv,
                          const AttentionParams& params, const int32_t* ends, int64_t num_blocks) {
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
      const KeyRange r = key_range(pos[t], params.window, end_of(ends, t));
      TANDEM_CHECK(r.hi < kv.max_blocks * BS,
                   "attention: token {} of row {} sees key {} past "
                   "max_blocks {} x block_size {}",
                   t, b, r.hi, kv.max_blocks, BS);
      lo = std::min(lo, r.lo);
      hi = std::max(hi, r.hi);
    }
    for (int64_t blk = lo / BS; blk <= hi / BS; blk++) {
      const int32_t id = bt[b * kv.max_blocks + blk];
      TANDEM_CHECK(id >= 0 && id < num_blocks,
                   "attention: row {} block_table[{}] = {} is outside [0, {})", b, blk, id,
                   num_blocks);
    }
  }
}

// Every (row, token tile, kv head) of the step, the costliest first so that the pool's
// last chunks are short ones.
std::vector<AttnJob> plan_jobs(const StepTensors& step, int64_t Hkv, int window,
                               const int32_t* ends) {
  const int32_t* starts = step.seq_starts.ptr<int32_t>();
  const int32_t* pos = step.positions.ptr<int32_t>();
  std::vector<AttnJob> jobs;
  for (int b = 0; b < step.num_rows; b++)
    for (int64_t t0 = starts[b]; t0 < starts[b + 1]; t0 += kJobTokens) {
      AttnJob job;
      job.row = b;
      job.t0 = int32_t(t0);
      job.t1 = int32_t(std::min<int64_t>(t0 + kJobTokens, starts[b + 1]));
      job.lo = INT64_MAX;
      job.hi = -1;
      for (int64_t t = job.t0; t < job.t1; t++) {
        const KeyRange r = key_range(pos[t], window, end_of(ends, t));
        job.lo = std::min(job.lo, r.lo);
        job.hi = std::max(job.hi, r.hi);
      }
      for (int64_t h = 0; h < Hkv; h++) {
        job.kvh = int32_t(h);
        jobs.push_back(job);
      }
    }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const AttnJob& x, const AttnJob& y) { return x.cost() > y.cost(); });
  return jobs;
}

// Tiles start where a key position is a multiple of kAttnTileKeys or of the block size:
// the first tile holding key p, and the start of the tile after the one starting at k0.
int64_t tile_start(int64_t p, int64_t BS) {
  return std::max(p - p % BS, p - p % cpu::kAttnTileKeys);
}
int64_t next_tile(int64_t k0, int64_t BS) {
  return std::min(k0 - k0 % BS + BS, k0 - k0 % cpu::kAttnTileKeys + cpu::kAttnTileKeys);
}

// One thread's work space, grown to the largest job it runs.
struct JobScratch {
  std::vector<const float*> q;
  std::vector<float*> out;
  std::vector<int64_t> hi, lo;
  std::vector<float> m, l, tile, rows, zero;

  void fit(int64_t num, int64_t Dh, bool decodes) {
    q.resize(size_t(num));
    out.resize(size_t(num));
    hi.resize(size_t(num));
    lo.resize(size_t(num));
    m.resize(size_t(num));
    l.resize(size_t(num));
    tile.resize(size_t(cpu::attn_tile_scratch(num, Dh)));
    if (decodes) rows.resize(size_t(2 * cpu::kAttnTilesPerCall * cpu::kAttnTileKeys * Dh));
    zero.assign(size_t(Dh), 0.f);
  }
};

// The job's queries: token-major, then the query heads of its kv head.
cpu::AttnQueries job_queries(const AttnView& a, const AttnJob& job, JobScratch& w) {
  const int64_t G = a.Hq / a.Hkv, Dh = a.Dh;
  cpu::AttnQueries qs;
  qs.num = (job.t1 - job.t0) * G;
  qs.Dh = Dh;
  qs.scale = a.params.scale;
  qs.softcap = a.params.softcap;
  for (int64_t t = job.t0, i = 0; t < job.t1; t++)
    for (int64_t g = 0; g < G; g++, i++) {
      const int64_t row = (t * a.Hq + job.kvh * G + g) * Dh;
      w.q[size_t(i)] = a.q + row;
      w.out[size_t(i)] = a.out + row;
      std::fill(a.out + row, a.out + row + Dh, 0.f);
      const KeyRange r = key_range(a.positions[t], a.params.window, end_of(a.ends, t));
      w.hi[size_t(i)] = r.hi;
      w.lo[size_t(i)] = r.lo;
      w.m[size_t(i)] = -INFINITY;
      w.l[size_t(i)] = 0.f;
    }
  qs.q = w.q.data();
  qs.out = w.out.data();
  qs.hi = w.hi.data();
  qs.lo = w.lo.data();
  qs.m = w.m.data();
  qs.l = w.l.data();
  return qs;
}

// Runs one job over a cache of element type Elem: over keys [lo, hi], kAttnTilesPerCall
// tiles at a time.
template <typename Elem>
void run_job(const AttnView& a, const AttnJob& job, const AttnKernels& kern, JobScratch& w) {
  constexpr bool decodes = !std::is_same_v<Elem, float>;
  w.fit((job.t1 - job.t0) * (a.Hq / a.Hkv), a.Dh, decodes);
  const cpu::AttnQueries qs = job_queries(a, job, w);
  const cpu::KvRows<Elem> keys(a.k), values(a.v);
  const int32_t* bt = a.block_table + int64_t(job.row) * a.max_blocks;
  cpu::AttnTile tiles[cpu::kAttnTilesPerCall];
  int64_t num_tiles = 0;
  for (int64_t k0 = tile_start(job.lo, a.BS); k0 <= job.hi; k0 = next_tile(k0, a.BS)) {
    cpu::AttnTile& tile = tiles[num_tiles];
    tile.key0 = k0;
    tile.n = std::min(next_tile(k0, a.BS), job.hi + 1) - k0;
    for (int64_t j = 0; j < cpu::kAttnTileKeys; j++) {
      const int64_t p = k0 + j;
      if (j >= tile.n || p < job.lo) {
        tile.k[j] = tile.v[j] = w.zero.data();
        continue;
      }
      const int64_t off = ((int64_t(bt[p / a.BS]) * a.BS + p % a.BS) * a.Hkv + job.kvh) * a.Dh;
      float* decoded = decodes ? w.rows.data() + 2 * (num_tiles * cpu::kAttnTileKeys + j) * a.Dh : nullptr;
      tile.k[j] = keys.row(off, a.Dh, decoded);
      tile.v[j] = values.row(off, a.Dh, decoded ? decoded + a.Dh : nullptr);
    }
    if (++num_tiles == cpu::kAttnTilesPerCall) {
      kern.tiles(qs, tiles, num_tiles, w.tile.data());
      num_tiles = 0;
    }
  }
  if (num_tiles > 0) kern.tiles(qs, tiles, num_tiles, w.tile.data());
  kern.finish(qs);
}

// Every job of the step, spread over the pool one job per claim (jobs differ in size).
template <typename Elem>
void run_jobs(ThreadPool& pool, const AttnView& view, const std::vector<AttnJob>& jobs,
              const AttnKernels& kern) {
  int64_t work = 0;
  for (const AttnJob& j : jobs) work += j.cost();
  auto run = [&](int64_t begin, int64_t end) {
    thread_local JobScratch w;
    for (int64_t i = begin; i < end; i++) run_job<Elem>(view, jobs[size_t(i)], kern, w);
  };
  const int64_t n = int64_t(jobs.size());
  // Below ~64k multiply-adds, waking the pool costs more than the job takes.
  if (n > 1 && work * (view.Hq / view.Hkv) * view.Dh >= (int64_t(1) << 16) && pool.num_threads() > 1)
    pool.parallel_for(n, run, n);
  else
    run(0, n);
}

}  // namespace

// Writes the step's new K and V into their slots, in the cache's dtype; a token of a
// negative slot (padding: engine/verify_graphs.h) writes nothing.
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
    if (slot[t] < 0) continue;
    TANDEM_CHECK(slot[t] < slots, "write_kv: slot {} of token {} outside [0, {})", slot[t], t,
                 slots);
    cpu::store_kv_values(cache.k, slot[t] * row, k.ptr<float>() + t * row, row);
    cpu::store_kv_values(cache.v, slot[t] * row, v.ptr<float>() + t * row, row);
  }
}

// Causal (optionally windowed, softcapped) GQA attention of each new token over its
// row's cached keys, and the rest of its image where the layer asks (KeyRange).   out, q [T, Hq,
// Dh] f32; cache [NB, BS, Hkv, Dh] f32 or f8_e4m3
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
  const int32_t* ends = media_ends_for(step, params);
  check_attention_step(step, kv, params, ends, cache.k.dim(0));

  AttnView view;
  view.q = q.ptr<float>();
  view.k = cache.k.data;
  view.v = cache.v.data;
  view.out = out.ptr<float>();
  view.positions = step.positions.ptr<int32_t>();
  view.ends = ends;
  view.block_table = kv.block_table.ptr<int32_t>();
  view.Hq = Hq;
  view.Hkv = Hkv;
  view.Dh = Dh;
  view.BS = step.block_size;
  view.max_blocks = kv.max_blocks;
  view.params = params;
  const std::vector<AttnJob> jobs = plan_jobs(step, Hkv, params.window, ends);
  const AttnKernels kern = kernels_for(isa_);
  if (cache_dtype == DType::F8E4M3)
    run_jobs<uint8_t>(*pool_, view, jobs, kern);
  else
    run_jobs<float>(*pool_, view, jobs, kern);
}

}  // namespace tandem
