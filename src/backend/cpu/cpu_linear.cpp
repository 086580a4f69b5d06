// Row-moving and row-mixing ops: linear (cpu_gemm.h; ggml block types: cpu_block_gemm.h),
// embedding lookup, row gather.
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"
#include "backend/cpu/cpu_gemm.h"

namespace tandem {

// out [T, N] = x [T, K] · w [N, K]ᵀ (+ bias [N]), w f32, bf16, f16 or a ggml block type (its
// rows whole blocks; cpu_block_gemm.h). x and out may carry extra leading dims (e.g.
// [T, H, Dh]); only rows and the last dim matter.
void CpuBackend::linear(Tensor& out, const Tensor& x, const Linear& l) {
  if (l.quant) return linear_fp8(out, x, l);
  const Tensor &w = l.weight, &bias = l.bias;
  cpu::check_tensor(out, DType::F32, "linear", "out");
  cpu::check_tensor(x, DType::F32, "linear", "x");
  const DType w_dtype = cpu::check_matrix_weight(w, "linear", "w");
  cpu::check_ndim(w, 2, "linear", "w");
  const int64_t T = x.rows(), K = w.dim(1), N = w.dim(0);
  TANDEM_CHECK(x.cols() == K, "linear: x {} does not match w {} (K = {})", x.shape.str(),
               w.shape.str(), K);
  TANDEM_CHECK(out.rows() == T && out.cols() == N, "linear: out {} must be [{}, {}]",
               out.shape.str(), T, N);
  TANDEM_CHECK(out.data != x.data && out.data != w.data, "linear: out may not alias x or w");
  TANDEM_CHECK(K > 0, "linear: empty reduction dim in w {}", w.shape.str());
  if (T == 0) return;
  float* o = out.ptr<float>();
  if (dtype_is_block(w_dtype))
    block_product(o, x.ptr<float>(), w, T, N, K);
  else
    cpu::gemm_xwt(*pool_, o, x.ptr<float>(), w.data, w_dtype, T, N, K, {isa_});
  if (!bias.defined()) return;
  const cpu::F32Weights widened(bias, "linear", "bias");
  TANDEM_CHECK(bias.numel() == N, "linear: bias {} must have {} elements", bias.shape.str(), N);
  const float* b = widened.data();
  cpu::parallel_for(*pool_, T, N, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t++)
      for (int64_t n = 0; n < N; n++) o[t * N + n] += b[n];
  });
}

void CpuBackend::block_product(float* out, const float* x, const Tensor& w, int64_t M, int64_t N,
                               int64_t K) {
  const cpu::PanelLookup p = panels_.find(w);
  if (!p.found())
    return cpu::block_gemm_xwt(*pool_, out, x, w.data, w.dtype, M, N, K, block_arithmetic_, isa_);
  if (block_arithmetic_ == cpu::BlockArithmetic::Exact) {
    // The f32 GEMM over the decoded values: the exact kernels' bits (cpu_block_gemm.h).
    std::vector<float> values(size_t(N * K));
    cpu::BlockPanelStore::decode_rows(p, w.dtype, K, p.row0, p.row0 + N, values.data());
    return cpu::gemm_xwt(*pool_, out, x, values.data(), DType::F32, M, N, K, {isa_});
  }
  // Whole panels from the one w starts in (rows past the last panel: the kept blocks), so each
  // row has the bits it has in the whole weight; w's columns are then cut out.
  const int64_t end = p.row0 + N, r0 = p.row0 / 16 * 16;
  const int64_t r1 = end <= p.kept_from ? (end + 15) / 16 * 16 : end;
  const uint8_t* rows = p.base + size_t(r0) * dtype_row_bytes(w.dtype, K);
  const uint8_t* panels = p.panels + size_t(r0 / 16) * p.panel_bytes;
  if (r0 == p.row0 && r1 == end)
    return cpu::block_gemm_xwt(*pool_, out, x, rows, w.dtype, M, N, K, block_arithmetic_, isa_,
                               panels);
  const int64_t wide_n = r1 - r0;
  std::vector<float> wide(size_t(M * wide_n));
  cpu::block_gemm_xwt(*pool_, wide.data(), x, rows, w.dtype, M, wide_n, K, block_arithmetic_, isa_,
                      panels);
  for (int64_t m = 0; m < M; m++)
    std::memcpy(out + m * N, wide.data() + m * wide_n + (p.row0 - r0), size_t(N) * sizeof(float));
}

// out [T, D] = table [V, D][ids [T]] * scale; the table f32, bf16, f16 or a ggml block type
// (each row decoded as dequantize_row decodes it).
void CpuBackend::embedding(Tensor& out, const Tensor& table, const Tensor& ids, float scale) {
  cpu::check_tensor(out, DType::F32, "embedding", "out");
  const DType table_dtype = cpu::check_matrix_weight(table, "embedding", "table");
  cpu::check_tensor(ids, DType::I32, "embedding", "ids");
  cpu::check_ndim(table, 2, "embedding", "table");
  const int64_t T = ids.numel(), V = table.dim(0), D = table.dim(1);
  TANDEM_CHECK(out.rows() == T && out.cols() == D, "embedding: out {} must be [{}, {}]",
               out.shape.str(), T, D);
  const int32_t* id = ids.ptr<int32_t>();
  for (int64_t t = 0; t < T; t++)
    TANDEM_CHECK(id[t] >= 0 && id[t] < V, "embedding: token id {} at index {} is outside [0, {})",
                 id[t], t, V);
  const size_t row_bytes = dtype_row_bytes(table_dtype, D);
  const char* tab = static_cast<const char*>(table.data);
  // A block table held as panels (cpu_block_panel_store.h) decodes its rows from them.
  const cpu::PanelLookup p = dtype_is_block(table_dtype) ? panels_.find(table) : cpu::PanelLookup{};
  float* o = out.ptr<float>();
  cpu::parallel_for(*pool_, T, D, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t++) {
      float* row = o + t * D;
      if (p.found())
        cpu::BlockPanelStore::decode_rows(p, table_dtype, D, p.row0 + id[t], p.row0 + id[t] + 1,
                                          row);
      else
        convert_to_f32(tab + size_t(id[t]) * row_bytes, table_dtype, row, size_t(D));
      for (int64_t d = 0; d < D; d++) row[d] *= scale;
    }
  });
}

// out [S, D] = x [T, D][index [S]]. Any dtype, copied as bytes.
void CpuBackend::gather_rows(Tensor& out, const Tensor& x, const Tensor& index) {
  cpu::check_tensor(x, x.dtype, "gather_rows", "x");
  cpu::check_tensor(out, x.dtype, "gather_rows", "out");
  cpu::check_tensor(index, DType::I32, "gather_rows", "index");
  const int64_t S = index.numel(), T = x.rows(), D = x.cols();
  TANDEM_CHECK(out.rows() == S && out.cols() == D, "gather_rows: out {} must be [{}, {}]",
               out.shape.str(), S, D);
  TANDEM_CHECK(out.data != x.data, "gather_rows: out may not alias x");
  const int32_t* idx = index.ptr<int32_t>();
  const size_t row_bytes = size_t(D) * dtype_size(x.dtype);
  for (int64_t s = 0; s < S; s++) {
    TANDEM_CHECK(idx[s] >= 0 && idx[s] < T, "gather_rows: index {} at {} is outside [0, {})",
                 idx[s], s, T);
    std::memcpy(static_cast<char*>(out.data) + size_t(s) * row_bytes,
                static_cast<const char*>(x.data) + size_t(idx[s]) * row_bytes, row_bytes);
  }
}

}  // namespace tandem
