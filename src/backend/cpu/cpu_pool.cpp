// segment_sum: the runs of rows an embedding row pools (model/pooled_hidden.h), summed in
// f32 in row order — one thread per run, so the sum does not depend on the thread count.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_common.h"

namespace tandem {

// out [E, D] f32 = per run e, Σ x[starts[e] .. starts[e+1]).   x [Q, D] f32, starts [E+1] i32
void CpuBackend::segment_sum(Tensor& out, const Tensor& x, const Tensor& starts) {
  cpu::check_tensor(out, DType::F32, "segment_sum", "out");
  cpu::check_tensor(x, DType::F32, "segment_sum", "x");
  cpu::check_tensor(starts, DType::I32, "segment_sum", "starts");
  const int64_t E = starts.numel() - 1, Q = x.rows(), D = x.cols();
  TANDEM_CHECK(E >= 0 && out.rows() == E && out.cols() == D,
               "segment_sum: out {} must be [{}, {}] for {} run starts", out.shape.str(), E, D,
               starts.numel());
  const int32_t* s = starts.ptr<int32_t>();
  TANDEM_CHECK(s[0] == 0 && s[E] == Q, "segment_sum: the runs cover [{}, {}), x has {} rows", s[0],
               s[E], Q);
  for (int64_t e = 0; e < E; e++)
    TANDEM_CHECK(s[e] <= s[e + 1], "segment_sum: run {} starts at {} and ends at {}", e, s[e],
                 s[e + 1]);
  const float* xs = x.ptr<float>();
  float* o = out.ptr<float>();
  cpu::parallel_for(pool(), E, std::max<int64_t>(1, Q / std::max<int64_t>(E, 1)) * D,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t e = begin; e < end; e++) {
                        float* row = o + e * D;
                        std::fill(row, row + D, 0.f);
                        for (int64_t q = s[e]; q < s[e + 1]; q++)
                          for (int64_t d = 0; d < D; d++) row[d] += xs[q * D + d];
                      }
                    });
}

}  // namespace tandem
