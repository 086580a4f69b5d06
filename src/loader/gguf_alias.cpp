#include "loader/gguf_alias.h"

#include <cstring>

#include "core/error.h"
#include "loader/gguf_model.h"

namespace tandem {

Tensor unpermute_head_rows(const Tensor& t, int heads) {
  const int64_t rows = t.ndim() == 0 ? 1 : t.dim(0);
  TANDEM_CHECK(heads > 0 && rows % heads == 0 && (rows / heads) % 2 == 0,
               "unpermute: {} rows are not {} heads of an even size", rows, heads);
  const int64_t head = rows / heads, half = head / 2;
  const size_t row_bytes = t.nbytes() / size_t(rows);
  Tensor out = Tensor::empty_host(t.dtype, t.shape);
  const char* src = static_cast<const char*>(t.data);
  char* dst = static_cast<char*>(out.data);
  for (int64_t h = 0; h < heads; h++)
    for (int64_t r = 0; r < head; r++) {
      const int64_t from = h * head + 2 * (r % half) + r / half;
      std::memcpy(dst + size_t(h * head + r) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
    }
  return out;
}

Tensor read_gguf_alias(const GgufModel& model, const std::string& name, const GgufAlias& a) {
  const std::string where = fmt::format("{}: tensor '{}' (GGUF '{}')", model.path().string(), name,
                                        a.gguf_name);
  if (!model.find(a.gguf_name)) fail("{}: GGUF tensor '{}' not found", where, a.gguf_name);
  Tensor t = model.tensor(a.gguf_name);
  if (a.rows) {
    const int64_t rows = t.ndim() == 0 ? 1 : t.dim(0);
    if (a.rows->first < 0 || a.rows->count <= 0 || a.rows->first + a.rows->count > rows)
      fail("{}: rows [{}, {}) are not within its {} rows", where, a.rows->first,
           a.rows->first + a.rows->count, rows);
    t = t.slice_rows(a.rows->first, a.rows->count);
    if (t.ndim() == 3 && a.rows->count == 1) t = t.reshape({t.dim(1), t.dim(2)});  // one expert
  }
  if (a.unpermute_heads > 0) {
    const int64_t rows = t.ndim() == 0 ? 1 : t.dim(0);
    if (rows % a.unpermute_heads != 0 || (rows / a.unpermute_heads) % 2 != 0)
      fail("{}: {} rows are not {} heads of an even size", where, rows, a.unpermute_heads);
    t = unpermute_head_rows(t, a.unpermute_heads);
  }
  if (a.add != 0.f) {
    if (t.dtype != DType::F32)
      fail("{}: is {}, but only an f32 tensor can be shifted by {}", where, dtype_name(t.dtype), a.add);
    Tensor shifted = Tensor::empty_host(DType::F32, t.shape);
    for (int64_t i = 0; i < t.numel(); i++) shifted.ptr<float>()[i] = t.ptr<float>()[i] + a.add;
    t = shifted;
  }
  return t;
}

}  // namespace tandem
