#include "backend/backend.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace tandem {

int64_t Backend::available_memory() const {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  while (in >> key >> kb)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t(4) << 30;
}

void Backend::capture_begin() { fail("{}: graphs are not supported", name()); }
std::shared_ptr<void> Backend::capture_end() { fail("{}: graphs are not supported", name()); }
void Backend::replay(const std::shared_ptr<void>&) { fail("{}: graphs are not supported", name()); }

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

// --- ops added for Gemma 3n ---
// Defaults for backends that do not implement them yet: a clear error, never a wrong result.
namespace tandem {

void Backend::sub(Tensor&, const Tensor&, const Tensor&) {
  fail("{}: op 'sub' is not implemented", name());
}
void Backend::mul(Tensor&, const Tensor&, const Tensor&) {
  fail("{}: op 'mul' is not implemented", name());
}
void Backend::act_mul(Tensor&, const Tensor&, const Tensor&, Activation) {
  fail("{}: op 'act_mul' is not implemented", name());
}
void Backend::gaussian_topk(Tensor&, float) {
  fail("{}: op 'gaussian_topk' is not implemented", name());
}
void Backend::match_rms(Tensor&, const Tensor&, float) {
  fail("{}: op 'match_rms' is not implemented", name());
}
void Backend::mix_streams(Tensor&, const Tensor&, const Tensor&) {
  fail("{}: op 'mix_streams' is not implemented", name());
}
void Backend::swap_leading_dims(Tensor&, const Tensor&) {
  fail("{}: op 'swap_leading_dims' is not implemented", name());
}

}  // namespace tandem
