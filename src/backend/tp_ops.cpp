#include "backend/tp_ops.h"

#include <vector>

#include "core/error.h"

namespace tandem {

void bind_thread(Backend& be) {
  if (be.device() == Device::CUDA) cuda_bind_thread(be);
}

void vocab_slice_ids(Backend& be, Tensor& local, const Tensor& ids, int64_t first, int64_t rows) {
  if (be.device() == Device::CUDA) return cuda_vocab_slice_ids(be, local, ids, first, rows);
  TANDEM_CHECK(ids.device == Device::CPU && ids.dtype == DType::I32 && local.numel() == ids.numel(),
               "{}: vocab_slice_ids maps host i32 ids ({} {} for {} local)", be.name(), ids.numel(),
               dtype_name(ids.dtype), local.numel());
  std::vector<int32_t> mapped(size_t(ids.numel()));
  for (size_t t = 0; t < mapped.size(); t++) {
    const int64_t id = int64_t(ids.ptr<int32_t>()[t]) - first;
    mapped[t] = int32_t(id >= 0 && id < rows ? id : rows);
  }
  be.write_i32(local, mapped.data(), int64_t(mapped.size()));
}

}  // namespace tandem
