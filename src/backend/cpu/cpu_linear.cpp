// Row-moving and row-mixing ops: linear (cpu_gemm.h; ggml block types: cpu_block_gemm.h),
// embedding lookup, row gather.
#include <cstring>

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
    cpu::block_gemm_xwt(*pool_, o, x.ptr<float>(), w.data, w_dtype, T, N, K, block_arithmetic_,
                        isa_, panels_.find(w));
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
  float* o = out.ptr<float>();
  cpu::parallel_for(*pool_, T, D, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; t++) {
      float* row = o + t * D;
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
