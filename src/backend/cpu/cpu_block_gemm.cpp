#include "backend/cpu/cpu_block_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_block_kernels.h"
#include "backend/cpu/cpu_block_panels.h"
#include "backend/cpu/cpu_gemm_kernels.h"
#include "core/error.h"

namespace tandem::cpu {

namespace {

// A slice of weights this size stays in a core's L2 while the x rows pass over it.
constexpr int64_t kBlockBytes = 256 << 10;

BlockKind block_kind(DType t) {
  switch (t) {
    case DType::Q4_0:
      return BlockKind::Q4_0;
    case DType::Q4_1:
      return BlockKind::Q4_1;
    case DType::Q5_0:
      return BlockKind::Q5_0;
    case DType::Q5_1:
      return BlockKind::Q5_1;
    case DType::Q8_0:
      return BlockKind::Q8_0;
    case DType::Q2_K:
      return BlockKind::Q2_K;
    case DType::Q3_K:
      return BlockKind::Q3_K;
    case DType::Q4_K:
      return BlockKind::Q4_K;
    case DType::Q5_K:
      return BlockKind::Q5_K;
    case DType::Q6_K:
      return BlockKind::Q6_K;
    case DType::IQ4_NL:
      return BlockKind::IQ4_NL;
    case DType::IQ4_XS:
      return BlockKind::IQ4_XS;
    default:
      fail("block gemm: {} is not a ggml block type", dtype_name(t));
  }
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Weight rows per slice: at most kBlockBytes of `row_bytes` rows, and at least four slices
// per thread so the pool can even out a slow one.
int64_t slice_rows(int64_t N, int64_t row_bytes, int num_threads) {
  const int64_t fit = std::max<int64_t>(1, kBlockBytes / row_bytes);
  const int64_t spread = std::max<int64_t>(1, ceil_div(N, 4 * int64_t(num_threads)));
  return std::min(fit, spread);
}

// Slices of weight rows over the pool: fn(n0, n1) for each.
template <class F>
void over_slices(ThreadPool& pool, int64_t N, int64_t rows, F&& fn) {
  const int64_t slices = ceil_div(N, rows);
  pool.parallel_for(
      slices,
      [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; s++) fn(s * rows, std::min(N, (s + 1) * rows));
      },
      slices);
}

void exact_in_registers(ThreadPool& pool, float* out, const float* x, const uint8_t* w,
                        BlockKind kind, int64_t M, int64_t N, int64_t K, int64_t row_bytes,
                        CpuIsa isa) {
  BlockExactOperands g;
  g.x = x;
  g.w = w;
  g.out = out;
  g.M = M;
  g.K = K;
  g.ldo = N;
  g.kind = kind;
  g.block_rows = std::max<int64_t>(1, kBlockBytes / row_bytes);
  const auto rows = isa == CpuIsa::Avx512 ? block_exact_rows_avx512 : block_exact_rows_avx2;
  over_slices(pool, N, slice_rows(N, row_bytes, pool.num_threads()),
              [&](int64_t n0, int64_t n1) { rows(g, n0, n1); });
}

// A slice of rows decoded to f32 once, then the f32 GEMM tile over it (same values, same
// order: the bits of exact_in_registers).
void exact_widened(ThreadPool& pool, float* out, const float* x, const uint8_t* w, BlockKind kind,
                   int64_t M, int64_t N, int64_t K, CpuIsa isa) {
  const auto decode = isa == CpuIsa::Avx512 ? block_decode_rows_avx512 : block_decode_rows_avx2;
  const auto gemm = isa == CpuIsa::Avx512 ? gemm_rows_avx512 : gemm_rows_avx2;
  over_slices(pool, N, slice_rows(N, K * 4, pool.num_threads()), [&](int64_t n0, int64_t n1) {
    thread_local std::vector<float> wide;
    wide.resize(size_t((n1 - n0) * K));
    decode(kind, w, K, n0, n1, wide.data());
    GemmOperands g;
    g.xp = x;  // K is a whole number of 32-value groups: no padding to add
    g.w = wide.data();
    g.out = out + n0;
    g.M = M;
    g.K = K;
    g.kp = K;
    g.ldo = N;
    g.wt = WeightType::F32;
    g.block_rows = n1 - n0;
    gemm(g, 0, n1 - n0);
  });
}

// Rows [n0, N) through the row kernels.
void int8_product(ThreadPool& pool, float* out, const float* x, const uint8_t* w, DType t,
                  int64_t M, int64_t N, int64_t K, int64_t row_bytes, CpuIsa isa, int64_t n0) {
  thread_local QuantizedActs acts;
  quantize_block_acts(pool, x, M, K, block_act_elems(t), acts);
  BlockInt8Operands g;
  g.acts = {acts.q.data(), acts.d.data(), acts.xs.data(), acts.act_block};
  g.w = w;
  g.out = out;
  g.M = M;
  g.K = K;
  g.ldo = N;
  g.kind = block_kind(t);
  const auto rows = block_int8_uses_vnni(isa) ? block_int8_rows_avx512vnni : block_int8_rows_avx2;
  over_slices(pool, N - n0, slice_rows(N - n0, row_bytes, pool.num_threads()),
              [&](int64_t a, int64_t b) { rows(g, n0 + a, n0 + b); });
}

// The activations of one panel product, kept per thread from call to call.
struct PanelActBuffers {
  std::vector<int8_t> q;
  std::vector<float> d, bsum;
  std::vector<int32_t> corr;
};

// Rows [0, 16·⌊N / 16⌋) from the panels, the rest through the row kernels.
void panel_product(ThreadPool& pool, float* out, const float* x, const uint8_t* w,
                   const uint8_t* panels, DType t, int64_t M, int64_t N, int64_t K,
                   int64_t row_bytes, CpuIsa isa) {
  const BlockKind kind = block_kind(t);
  const PanelShape& P = kPanelShapes[int(kind)];
  const bool vnni = block_int8_uses_vnni(isa);
  thread_local PanelActBuffers mine;
  PanelActBuffers& a = mine;  // the workers' lambdas must see this thread's buffers
  a.q.resize(size_t(M * K));
  a.d.resize(size_t(M * (K / P.elems)));
  a.corr.resize(size_t(M * (K / P.unit)));
  a.bsum.resize(size_t(M * (K / P.unit)));
  auto quantize = [&](int64_t m0, int64_t m1) {
    block_panel_acts_avx2(kind, !vnni, x, K, m0, m1, a.q.data(), a.d.data(), a.corr.data(),
                          a.bsum.data());
  };
  if (M >= 16)
    pool.parallel_for(M, quantize);
  else
    quantize(0, M);
  BlockPanelOperands g;
  g.acts = {a.q.data(), a.d.data(), a.corr.data(), a.bsum.data()};
  g.panels = panels;
  g.out = out;
  g.M = M;
  g.K = K;
  g.ldo = N;
  g.kind = kind;
  const auto groups = vnni ? block_panel_groups_avx512vnni : block_panel_groups_avx2;
  const int64_t G = N / kPanelRows;
  pool.parallel_for(G, [&](int64_t g0, int64_t g1) { groups(g, g0, g1); });
  if (G * kPanelRows < N) int8_product(pool, out, x, w, t, M, N, K, row_bytes, isa, G * kPanelRows);
}

}  // namespace

bool block_panels_supported(DType t) {
  return dtype_is_block(t) && kPanelShapes[int(block_kind(t))].packed;
}

size_t block_panels_bytes(DType t, int64_t N, int64_t K) {
  if (!block_panels_supported(t)) return 0;
  const PanelShape& P = kPanelShapes[int(block_kind(t))];
  TANDEM_CHECK(K > 0 && K % P.elems == 0,
               "block panels: a {} weight needs rows of whole blocks of {}, got K = {}",
               dtype_name(t), P.elems, K);
  return size_t(N / kPanelRows) * size_t(K / P.elems) * size_t(P.block_bytes());
}

void pack_block_panels(ThreadPool& pool, DType t, const void* w, int64_t N, int64_t K, void* dst) {
  const size_t panel_bytes = block_panels_bytes(t, kPanelRows, K);
  const int64_t G = N / kPanelRows;
  if (panel_bytes == 0 || G == 0) return;
  const auto* wb = static_cast<const uint8_t*>(w);
  auto* db = static_cast<uint8_t*>(dst);
  pool.parallel_for(G, [&](int64_t g0, int64_t g1) {
    block_pack_panels_avx2(block_kind(t), wb, K, g0, g1, db + size_t(g0) * panel_bytes);
  });
}

namespace {

// Level u of value v (in [0, elems)) of lane r in panel block pb (cpu_block_panels.h's layout).
int panel_level(const PanelShape& P, const uint8_t* pb, int r, int v) {
  if (!P.nibbles) return pb[(v / 4) * 64 + r * 4 + v % 4];
  // Unit 2p takes the low nibbles of qs[p·unit, (p + 1)·unit), unit 2p + 1 their high ones.
  const int unit = v / P.unit, q = (unit / 2) * P.unit + v % P.unit;
  const uint8_t byte = pb[(q / 4) * 64 + r * 4 + q % 4];
  return unit % 2 == 1 ? byte >> 4 : byte & 0xF;
}

}  // namespace

void unpack_block_panels_f32(DType t, const void* panels, int64_t K, int64_t r0, int64_t r1,
                             float* out) {
  const PanelShape& P = kPanelShapes[int(block_kind(t))];
  TANDEM_CHECK(P.packed && K % P.elems == 0, "unpack panels: {} has no panels of K = {}",
               dtype_name(t), K);
  const size_t panel_bytes = block_panels_bytes(t, kPanelRows, K);
  const int64_t blocks = K / P.elems;
  for (int64_t row = r0; row < r1; row++) {
    const int r = int(row % kPanelRows);
    const auto* panel =
        static_cast<const uint8_t*>(panels) + size_t(row / kPanelRows) * panel_bytes;
    float* o = out + (row - r0) * K;
    for (int64_t b = 0; b < blocks; b++) {
      const uint8_t* pb = panel + b * P.block_bytes();
      float d, dm = 0.f;
      std::memcpy(&d, pb + P.d_offset() + 4 * r, 4);
      if (P.min) std::memcpy(&dm, pb + P.d_offset() + 4 * (kPanelRows + r), 4);
      for (int j = 0; j < P.units(); j++) {
        const int sc = P.scales ? int8_t(pb[P.level_bytes() + j * kPanelRows + r]) : 1;
        const int mn =
            P.scales && P.min ? int8_t(pb[P.level_bytes() + P.sc_bytes() + j * kPanelRows + r]) : 1;
        const float s = d * float(sc), c = dm * float(mn);  // two roundings: no contraction here
        for (int i = 0; i < P.unit; i++) {
          const int v = j * P.unit + i;
          const float x = s * (float(panel_level(P, pb, r, v)) - float(P.offset));
          o[b * P.elems + v] = P.min ? x + c : x;
        }
      }
    }
  }
}

std::string_view block_arithmetic_name(BlockArithmetic a) {
  return a == BlockArithmetic::Exact ? "exact" : "int8";
}

std::optional<BlockArithmetic> block_arithmetic_from_name(std::string_view name) {
  if (name == "exact") return BlockArithmetic::Exact;
  if (name == "int8") return BlockArithmetic::Int8;
  return std::nullopt;
}

int64_t exact_widen_rows(CpuIsa isa) {
  return isa == CpuIsa::Avx512 ? 16 : 8;
}

int64_t block_act_elems(DType t) {
  return dtype_block(t).elems == 256 ? 256 : 32;
}

bool block_int8_uses_vnni(CpuIsa isa) {
  return isa == CpuIsa::Avx512 && cpu_features().avx512_vnni;
}

void quantize_block_acts(ThreadPool& pool, const float* x, int64_t M, int64_t K, int64_t act_block,
                         QuantizedActs& out) {
  TANDEM_CHECK(K % act_block == 0 && act_block % 16 == 0,
               "block gemm: K {} is not a whole number of activation blocks of {}", K, act_block);
  out.act_block = act_block;
  out.q.resize(size_t(M * K));
  out.d.resize(size_t(M * (K / act_block)));
  out.xs.resize(size_t(M * (K / 16)));
  auto rows = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; m++)
      for (int64_t b = 0; b < K / act_block; b++) {
        const float* v = x + m * K + b * act_block;
        int8_t* q = out.q.data() + m * K + b * act_block;
        float amax = 0.f;
        for (int64_t i = 0; i < act_block; i++) amax = std::max(amax, std::fabs(v[i]));
        const float d = amax / 127.f, id = d > 0.f ? 1.f / d : 0.f;
        out.d[size_t(m * (K / act_block) + b)] = d;
        for (int64_t i = 0; i < act_block; i++)
          q[i] = int8_t(std::clamp(std::round(v[i] * id), -127.f, 127.f));
        for (int64_t r = 0; r < act_block / 16; r++) {
          int sum = 0;
          for (int i = 0; i < 16; i++) sum += q[16 * r + i];
          out.xs[size_t(m * (K / 16) + b * (act_block / 16) + r)] = d * float(sum);
        }
      }
  };
  if (M >= 16)
    pool.parallel_for(M, rows);
  else
    rows(0, M);
}

void block_gemm_xwt(ThreadPool& pool, float* out, const float* x, const void* w, DType t, int64_t M,
                    int64_t N, int64_t K, BlockArithmetic a, CpuIsa isa, const void* panels) {
  if (M == 0 || N == 0) return;
  const DTypeBlock blk = dtype_block(t);
  TANDEM_CHECK(dtype_is_block(t) && K > 0 && K % blk.elems == 0,
               "block gemm: a {} weight needs rows of whole blocks of {}, got K = {}",
               dtype_name(t), blk.elems, K);
  TANDEM_CHECK(isa <= cpu_max_isa(), "block gemm: {} kernels asked of a cpu without them",
               cpu_isa_name(isa));
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t row_bytes = int64_t(dtype_row_bytes(t, K));
  if (a == BlockArithmetic::Int8 && panels && block_panels_supported(t))
    return panel_product(pool, out, x, wb, static_cast<const uint8_t*>(panels), t, M, N, K,
                         row_bytes, isa);
  if (a == BlockArithmetic::Int8)
    return int8_product(pool, out, x, wb, t, M, N, K, row_bytes, isa, 0);
  if (M >= exact_widen_rows(isa))
    return exact_widened(pool, out, x, wb, block_kind(t), M, N, K, isa);
  exact_in_registers(pool, out, x, wb, block_kind(t), M, N, K, row_bytes, isa);
}

}  // namespace tandem::cpu
