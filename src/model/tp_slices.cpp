#include "model/tp_slices.h"

#include <cstring>

#include "core/error.h"
#include "model/config.h"

namespace tandem {
namespace {

void check_divides(int64_t dim, int size, const char* what) {
  if (dim % size != 0)
    fail("tensor parallelism: {} = {} is not divisible by --tensor-parallel-size {}", what, dim,
         size);
}

using Range = WeightSlice::Range;

WeightSlice rows_of(std::vector<Range> ranges, const TpShard& tp) {
  return {.kind = WeightSlice::Kind::Rows, .rows = std::move(ranges), .ranks = tp.size};
}

}  // namespace

void check_tp_divides(int64_t dim, int size, const std::string& what) {
  check_divides(dim, size, what.c_str());
}

WeightSlice tp_qkv_rows(int num_heads, int num_kv_heads, int64_t head_dim, int kv_parts,
                        const TpShard& tp) {
  const TpHeads h = tp_heads(num_heads, num_kv_heads, tp);
  const int64_t Dh = head_dim, Hq = num_heads, Hkv = num_kv_heads;
  std::vector<Range> rows = {{int64_t(tp.rank) * h.q_heads * Dh, h.q_heads * Dh}};
  for (int part = 0; part < kv_parts; part++)
    rows.push_back({(Hq + part * Hkv + h.kv_first) * Dh, h.kv_heads * Dh});
  return rows_of(std::move(rows), tp);
}

WeightSlice tp_gate_up_rows(int64_t F, const TpShard& tp) {
  const int64_t f = F / tp.size;
  return rows_of({{tp.rank * f, f}, {F + tp.rank * f, f}}, tp);
}

WeightSlice tp_columns(int64_t K, const TpShard& tp) {
  const int64_t k = K / tp.size;
  return {.kind = WeightSlice::Kind::Columns, .columns = {tp.rank * k, k}, .ranks = tp.size};
}

WeightSlice tp_vocab_rows(int64_t V, const TpShard& tp) {
  return rows_of({{tp.rank * (V / tp.size), V / tp.size}}, tp);
}

void check_tp_heads(int num_heads, int num_kv_heads, int size, const std::string& what) {
  check_divides(num_heads, size, (what + "num_attention_heads").c_str());
  if (num_kv_heads >= size)
    check_divides(num_kv_heads, size, (what + "num_key_value_heads").c_str());
  else if (size % num_kv_heads != 0)
    fail(
        "tensor parallelism: --tensor-parallel-size {} is not a multiple of {}num_key_value_heads "
        "= {} (KV heads are replicated only when N is)",
        size, what, num_kv_heads);
}

void check_tp_dims(const ModelConfig& c, int size) {
  if (size <= 1) return;
  check_tp_heads(c.num_heads, c.num_kv_heads, size, "");
  for (int F : c.intermediate_sizes) check_divides(F, size, "intermediate_size");
  if (c.num_experts > 0) check_divides(c.moe_intermediate_size, size, "moe_intermediate_size");
  check_divides(c.vocab_size, size, "vocab_size");
}

TpHeads tp_heads(const ModelConfig& c, const TpShard& tp) {
  return tp_heads(c.num_heads, c.num_kv_heads, tp);
}

TpHeads tp_heads(int num_heads, int num_kv_heads, const TpShard& tp) {
  TpHeads h;
  h.q_heads = num_heads / tp.size;
  if (num_kv_heads >= tp.size) {
    h.kv_heads = num_kv_heads / tp.size;
    h.kv_first = tp.rank * h.kv_heads;
  } else {  // each rank's query heads lie in one KV group (N is a multiple of Hkv)
    h.kv_heads = 1;
    h.kv_first = tp.rank * h.q_heads / (num_heads / num_kv_heads);
  }
  return h;
}

WeightSlicer decoder_slicer(const ModelConfig& c, const TpShard& tp) {
  return [c, tp](const std::string& name, int layer) -> WeightSlice {
    const int64_t V = c.vocab_size, Dh = c.head_dim;
    const int64_t F = layer >= 0 ? c.intermediate_sizes[size_t(layer)] : 0;
    if (name == "embed" || name == "lm_head") return tp_vocab_rows(V, tp);
    if (name == "layers.{i}.qkv" || name == "layers.{i}.qkv_bias")
      return tp_qkv_rows(c.num_heads, c.num_kv_heads, Dh, 2, tp);
    if (name == "layers.{i}.o") return tp_columns(c.num_heads * Dh, tp);
    if (name == "layers.{i}.gate_up" || name == "layers.{i}.gate_up_bias")
      return tp_gate_up_rows(F, tp);
    if (name == "layers.{i}.down") return tp_columns(F, tp);
    if (name == "layers.{i}.experts_gate_up") return tp_gate_up_rows(c.moe_intermediate_size, tp);
    if (name == "layers.{i}.experts_down") return tp_columns(c.moe_intermediate_size, tp);
    if (name == "layers.{i}.o_bias" || name == "layers.{i}.down_bias")
      return tp.rank == 0 ? WeightSlice{} : WeightSlice{.kind = WeightSlice::Kind::Absent};
    for (const char* whole : {"final_norm", "layers.{i}.attn_norm", "layers.{i}.ffn_norm",
                              "layers.{i}.post_attn_norm", "layers.{i}.post_ffn_norm",
                              "layers.{i}.q_norm", "layers.{i}.k_norm", "layers.{i}.router"})
      if (name == whole) return {};
    fail("tensor parallelism: no split is defined for weight '{}'", name);
  };
}

namespace {

// Rows [begin, begin + count) of the parts fused along dim 0, as views of the parts.
void take_rows(std::vector<Tensor>& out, const std::vector<Tensor>& parts, Range want,
               const std::string& label) {
  int64_t offset = 0;
  for (const Tensor& p : parts) {
    const int64_t n = p.ndim() == 1 ? p.numel() : p.rows();
    const int64_t lo = std::max(want.begin, offset),
                  hi = std::min(want.begin + want.count, offset + n);
    if (lo < hi) out.push_back(p.slice_rows(lo - offset, hi - lo));
    offset += n;
  }
  if (want.begin + want.count > offset)
    fail("weight '{}': tensor parallelism needs rows [{}, {}) but its sources hold {}", label,
         want.begin, want.begin + want.count, offset);
}

// Columns [begin, begin + count) of the last dim of `t` (2-D or stacked 3-D), copied. A
// block type (GGUF) is cut between its blocks only: a slice that starts or ends inside one is
// an error naming the weight, its type and the number of slices.
Tensor take_columns(const Tensor& t, Range want, const std::string& label) {
  if (t.ndim() < 2 || want.begin + want.count > t.dim(t.ndim() - 1))
    fail("weight '{}' {}: tensor parallelism needs columns [{}, {}) of it", label, t.shape.str(),
         want.begin, want.begin + want.count);
  const int64_t K = t.dim(t.ndim() - 1), rows = t.numel() / K;
  const int elems = dtype_block(t.dtype).elems;
  if (want.begin % elems != 0 || want.count % elems != 0)
    fail(
        "weight '{}' ({}, {} input columns): --tensor-parallel-size {} would cut it into slices "
        "of {} columns, not a multiple of {}'s {}-value blocks (use a smaller N, or a file "
        "whose type has smaller blocks)",
        label, dtype_name(t.dtype), K, K / want.count, want.count, dtype_name(t.dtype), elems);
  Shape shape = t.shape;
  shape.dims[size_t(t.ndim() - 1)] = want.count;
  Tensor out = Tensor::empty_host(t.dtype, shape);
  const size_t row = dtype_row_bytes(t.dtype, K), skip = dtype_row_bytes(t.dtype, want.begin),
               take = dtype_row_bytes(t.dtype, want.count);
  for (int64_t r = 0; r < rows; r++)
    std::memcpy(static_cast<char*>(out.data) + size_t(r) * take,
                static_cast<const char*>(t.data) + size_t(r) * row + skip, take);
  return out;
}

}  // namespace

Tensor slice_parts(const std::vector<Tensor>& parts, const WeightSlice& slice,
                   const std::string& label,
                   const std::function<Tensor(const std::vector<Tensor>&)>& concat) {
  switch (slice.kind) {
    case WeightSlice::Kind::Rows: {
      std::vector<Tensor> views;
      for (const Range& r : slice.rows) take_rows(views, parts, r, label);
      return concat(views);
    }
    case WeightSlice::Kind::Columns:
      return take_columns(concat(parts), slice.columns, label);
    case WeightSlice::Kind::Whole:
    case WeightSlice::Kind::Absent:
      break;
  }
  return concat(parts);
}

}  // namespace tandem
