#include "model/layers.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/tp_ops.h"
#include "core/error.h"

namespace tandem {
namespace {

// out = x · Wᵀ (+ b); a projection stored in pieces of different weight types (linear.h)
// runs each piece and joins their columns.
void base_linear(Backend& be, Tensor& out, const Tensor& x, const Linear& l) {
  if (l.pieces.empty()) return be.linear(out, x, l);
  std::vector<Tensor> parts;
  parts.reserve(l.pieces.size());
  for (const Linear& piece : l.pieces) {
    parts.push_back(be.alloc(out.dtype, {x.rows(), piece.out_features()}));
    be.linear(parts.back(), x, piece);
  }
  be.concat_columns(out, parts);
}

}  // namespace

Tensor linear(Backend& be, const Tensor& x, const Linear& l) {
  TANDEM_CHECK(!l.lora, "linear: a projection [{}, {}] with LoRA slots needs the step's slots",
               l.out_features(), l.in_features());
  Tensor out = be.alloc(be.act_dtype(), {x.rows(), l.out_features()});
  base_linear(be, out, x, l);
  return out;
}

Tensor linear(Backend& be, const Tensor& x, const Linear& l, const StepTensors& step) {
  Tensor out = be.alloc(be.act_dtype(), {x.rows(), l.out_features()});
  base_linear(be, out, x, l);
  if (l.lora && step.lora.defined()) be.lora_add(out, x, *l.lora, step.lora);
  return out;
}

Tensor linear(Backend& be, const Tensor& x, const Fp8Input& xq, const Linear& l,
              const StepTensors& step) {
  if (!xq.defined()) return linear(be, x, l, step);
  Tensor out = be.alloc(be.act_dtype(), {x.rows(), l.out_features()});
  be.linear_fp8_input(out, x, xq, l);
  if (l.lora && step.lora.defined()) be.lora_add(out, x, *l.lora, step.lora);
  return out;
}

Tensor linear_f32(Backend& be, const Tensor& x, const Linear& l) {
  Tensor out = be.alloc(DType::F32, {x.rows(), l.out_features()});
  base_linear(be, out, x, l);
  return out;
}

Tensor rms_norm(Backend& be, const Tensor& x, const RmsNorm& n) {
  Tensor out = be.alloc(x.dtype, x.shape);
  be.rms_norm(out, x, n.weight, n.eps, n.weight_offset);
  return out;
}

void rms_norm_in_place(Backend& be, Tensor& x, const RmsNorm& n) {
  be.rms_norm(x, x, n.weight, n.eps, n.weight_offset);
}

Tensor add_rms_norm(Backend& be, Tensor& residual, const Tensor& x, const RmsNorm& n) {
  Tensor out = be.alloc(residual.dtype, residual.shape);
  be.add_rms_norm(out, residual, x, n.weight, n.eps, n.weight_offset);
  return out;
}

Tensor embedding(Backend& be, const Tensor& table, const Tensor& ids, float scale) {
  Tensor out = be.alloc(be.act_dtype(), {ids.numel(), table.dim(1)});
  be.embedding(out, table, ids, scale);
  return out;
}

Tensor vocab_slice_embedding(Backend& be, const Tensor& table, int64_t rows, const Tensor& ids,
                             int64_t first, float scale) {
  if (table.dim(0) == rows + 1) {  // the last row is zeros
    Tensor local_ids = be.alloc(DType::I32, {ids.numel()});
    vocab_slice_ids(be, local_ids, ids, first, rows);
    return embedding(be, table, local_ids, scale);
  }
  TANDEM_CHECK(be.device() == Device::CPU && ids.device == Device::CPU && ids.dtype == DType::I32,
               "the vocabulary-split embedding runs on CPU ranks only (backend {})", be.name());
  const int64_t local = rows;
  std::vector<int32_t> mapped(size_t(ids.numel()));
  for (size_t t = 0; t < mapped.size(); t++) {
    const int64_t id = int64_t(ids.ptr<int32_t>()[t]) - first;
    mapped[t] = int32_t(id >= 0 && id < local ? id : 0);  // row 0 stands in; zeroed below
  }
  Tensor local_ids = be.alloc(DType::I32, {ids.numel()});
  be.write_i32(local_ids, mapped.data(), int64_t(mapped.size()));
  Tensor out = embedding(be, table, local_ids, scale);
  be.synchronize();
  const size_t row_bytes = dtype_row_bytes(out.dtype, out.cols());
  for (size_t t = 0; t < mapped.size(); t++) {
    const int64_t id = int64_t(ids.ptr<int32_t>()[t]) - first;
    if (id < 0 || id >= local)
      std::memset(static_cast<char*>(out.data) + t * row_bytes, 0, row_bytes);
  }
  return out;
}

Tensor vocab_slice_table(Backend& be, const Tensor& slice, Linear* tied_head) {
  const bool block = dtype_is_block(slice.dtype);
  if (block && be.device() == Device::CPU) return slice;  // looked up as loaded, ids on the host
  Tensor table = be.zeros(block ? be.act_dtype() : slice.dtype, {slice.rows() + 1, slice.cols()});
  Tensor rows = table.slice_rows(0, slice.rows());
  if (!block) {
    be.copy(rows, slice);
    if (tied_head && tied_head->weight.data == slice.data) tied_head->weight = rows;
    return table;
  }
  // Every row looked up once: the block lookup's own dequantization, so a step's lookup in
  // the table gives what the block table's would (the tied head keeps the blocks).
  std::vector<int32_t> all(size_t(slice.rows()));
  for (size_t i = 0; i < all.size(); i++) all[i] = int32_t(i);
  Tensor ids = be.alloc(DType::I32, {slice.rows()});
  be.write_i32(ids, all.data(), slice.rows());
  be.embedding(rows, slice, ids, 1.f);
  return table;
}

Tensor tp_embedding(Backend& be, const Tensor& table, const Tensor& ids, int64_t vocab,
                    const TpShard& tp, float scale) {
  if (!tp.comm) return embedding(be, table, ids, scale);
  const int64_t rows = vocab / tp.size, first = int64_t(tp.rank) * rows;
  Tensor x = vocab_slice_embedding(be, table, rows, ids, first, scale);
  tp.comm->all_reduce_sum(x);
  return x;
}

Tensor gather_rows(Backend& be, const Tensor& x, const Tensor& index) {
  Tensor out = be.alloc(x.dtype, {index.numel(), x.cols()});
  be.gather_rows(out, x, index);
  return out;
}

Tensor ones(Backend& be, int64_t n) {
  Tensor host = Tensor::empty_host(DType::F32, {n});
  std::fill(host.ptr<float>(), host.ptr<float>() + n, 1.f);
  return be.upload(host, be.act_dtype());
}

void write_media_rows(Backend& be, Tensor& x, const StepTensors& step) {
  for (const StepTensors::MediaRows& m : step.media) {
    const int64_t n = m.rows.dim(0);
    TANDEM_CHECK(m.first_token >= 0 && m.first_token + n <= x.dim(0) && m.rows.cols() == x.cols(),
                 "media rows {} at token {} do not fit the step's embeddings {}",
                 m.rows.shape.str(), m.first_token, x.shape.str());
    Tensor dst = x.slice_rows(m.first_token, n);
    be.copy(dst, m.rows);
  }
}

Tensor tokens_outside_media(Backend& be, const StepTensors& step, int32_t id) {
  if (step.media.empty()) return step.tokens;
  Tensor ids = be.alloc(DType::I32, {step.num_tokens});
  be.copy(ids, step.tokens.slice_rows(0, step.num_tokens));
  for (const StepTensors::MediaRows& m : step.media) {
    const std::vector<int32_t> fill(size_t(m.rows.dim(0)), id);
    Tensor dst = ids.slice_rows(m.first_token, m.rows.dim(0));
    be.write_i32(dst, fill.data(), int64_t(fill.size()));
  }
  return ids;
}

Tensor attention(Backend& be, const Tensor& h, const StepTensors& step, PagedKv& cache,
                 const Attention& a, const Fp8Input& hq) {
  const int64_t T = h.dim(0);
  Tensor heads = attention_heads(be, linear(be, h, hq, a.qkv, step), step, cache, a);
  return linear(be, heads.reshape({T, a.num_heads * a.head_dim}), a.o, step);
}

Tensor attention_heads(Backend& be, const Tensor& proj, const StepTensors& step, PagedKv& cache,
                       const Attention& a) {
  const int64_t T = proj.dim(0), Hq = a.num_heads, Dh = a.head_dim;
  Tensor q;
  if (a.reads_shared_kv) {  // the cache was written earlier in this step by its owner
    q = proj.reshape({T, Hq, Dh});
    if (a.norm.q.defined()) {
      Tensor rows = proj.reshape({T * Hq, Dh});
      be.rms_norm(rows, rows, a.norm.q, a.norm.eps, a.norm.weight_offset);
    }
    be.rope(q, step, a.rope);
  } else {
    q = be.alloc(be.act_dtype(), {T, Hq, Dh});
    be.qkv_to_cache(q, proj, cache, step, a.rope, a.norm);
  }
  Tensor attn = be.alloc(be.act_dtype(), {T, Hq, Dh});
  be.attention(attn, q, cache, step, a.params);
  return attn;
}

Tensor gated_mlp(Backend& be, const Tensor& h, const StepTensors& step, const GatedMlp& mlp,
                 const Fp8Input& hq) {
  Tensor gate_up = linear(be, h, hq, mlp.gate_up, step);  // [T, 2F]
  Tensor act = be.alloc(be.act_dtype(), {h.rows(), mlp.down.in_features()});
  if (!mlp.down.takes_fp8_input()) {
    be.gated_act(act, gate_up, mlp.act);
    return linear(be, act, mlp.down, step);
  }
  Fp8Input actq;
  be.gated_act_fp8(act, actq, gate_up, mlp.act);
  return linear(be, act, actq, mlp.down, step);
}

Tensor moe(Backend& be, const Tensor& route_in, const Tensor& x, const MoeBlock& m) {
  const int64_t T = x.rows();
  Tensor scores = linear_f32(be, route_in, m.router);  // [T, E]
  Tensor weights = be.alloc(DType::F32, {T, m.top_k});
  Tensor ids = be.alloc(DType::I32, {T, m.top_k});
  be.topk_route(weights, ids, scores, m.top_k, m.renormalize);
  Tensor out = be.alloc(be.act_dtype(), x.shape);
  be.moe_experts(out, x, weights, ids, m.experts_gate_up, m.experts_down, m.act);
  return out;
}

Tensor lm_head_logits(Backend& be, const Tensor& hidden, const LmHead& head, const Tensor& into) {
  Tensor normed = rms_norm(be, hidden, head.final_norm);
  if (head.logit_divisor != 1.f) be.scale(normed, 1.f / head.logit_divisor);
  // One rank holds the whole vocabulary: nothing to gather (the gather would copy the
  // [S, V] f32 logits twice, 33 MB each way at 64 rows of a 128k vocabulary).
  const int ranks = head.gather ? head.gather->size() : 1;
  const int64_t vocab = head.head.out_features() * ranks;
  if (into.defined())
    TANDEM_CHECK(into.dtype == DType::F32 && into.rows() == hidden.rows() && into.cols() == vocab,
                 "lm_head_logits: the logits buffer is {} {}, not [{}, {}] f32", into.shape.str(),
                 dtype_name(into.dtype), hidden.rows(), vocab);
  Tensor logits = into.defined() && ranks == 1
                      ? into
                      : be.alloc(DType::F32, {hidden.rows(), head.head.out_features()});
  base_linear(be, logits, normed, head.head);
  if (head.softcap > 0.f) be.softcap(logits, head.softcap);
  if (ranks == 1) return logits;
  Tensor all = into.defined() ? into : be.alloc(DType::F32, {logits.rows(), vocab});
  head.gather->all_gather_columns(all, logits);
  return all;
}

}  // namespace tandem
