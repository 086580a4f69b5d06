#include "backend/backend.h"

#include <cstring>

#include "core/error.h"

namespace tandem {

void Backend::split_columns(const Tensor& x, std::initializer_list<Tensor*> outs) {
  TANDEM_CHECK(device() == Device::CPU, "split_columns needs an override on {}", name());
  int64_t total = 0;
  for (Tensor* o : outs) {
    TANDEM_CHECK(o->dtype == x.dtype && o->rows() == x.rows(), "split_columns {} -> {}",
                 x.shape.str(), o->shape.str());
    total += o->cols();
  }
  TANDEM_CHECK(total == x.cols(), "split_columns: pieces sum to {} of {}", total, x.cols());
  size_t esize = dtype_size(x.dtype);
  const char* src = static_cast<const char*>(x.data);
  for (int64_t r = 0; r < x.rows(); r++) {
    int64_t col = 0;
    for (Tensor* o : outs) {
      std::memcpy(static_cast<char*>(o->data) + size_t(r * o->cols()) * esize,
                  src + size_t(r * x.cols() + col) * esize, size_t(o->cols()) * esize);
      col += o->cols();
    }
  }
}

}  // namespace tandem
