#include "backend/cpu/cpu_block_panel_store.h"

#include <iterator>

#include "backend/cpu/cpu_block_gemm.h"

namespace tandem::cpu {

void BlockPanelStore::add(ThreadPool& pool, const Tensor& w) {
  if (!w.defined() || !block_panels_supported(w.dtype) || w.ndim() < 2) return;
  const int64_t rows = w.rows(), K = w.cols();
  if (rows < 16 || K % dtype_block(w.dtype).elems != 0) return;
  Entry e;
  e.bytes = block_panels_bytes(w.dtype, rows, K);
  e.panels = arena_.allocate(e.bytes);
  pack_block_panels(pool, w.dtype, w.data, rows, K, e.panels.get());
  e.owner = w.storage;
  e.dtype = w.dtype;
  e.K = K;
  e.row_bytes = dtype_row_bytes(w.dtype, K);
  e.panel_bytes = block_panels_bytes(w.dtype, 16, K);
  const auto* begin = static_cast<const uint8_t*>(w.data);
  e.end = begin + w.nbytes();
  std::lock_guard<std::mutex> lock(mu_);
  // Drop what the new weight overlaps (released memory handed out again) and what expired.
  for (auto it = by_begin_.begin(); it != by_begin_.end();) {
    const bool overlaps = it->first < e.end && begin < it->second.end;
    it = overlaps || it->second.owner.expired() ? by_begin_.erase(it) : std::next(it);
  }
  by_begin_.emplace(begin, std::move(e));
}

const void* BlockPanelStore::find(const Tensor& w) const {
  const auto* p = static_cast<const uint8_t*>(w.data);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_begin_.upper_bound(p);
  if (it == by_begin_.begin()) return nullptr;
  --it;
  const Entry& e = it->second;
  if (p >= e.end || e.dtype != w.dtype || e.K != w.cols() || e.owner.expired()) return nullptr;
  const size_t offset = size_t(p - it->first);
  if (offset % e.row_bytes != 0) return nullptr;
  const size_t row = offset / e.row_bytes;
  if (row % 16 != 0) return nullptr;
  return static_cast<const uint8_t*>(e.panels.get()) + row / 16 * e.panel_bytes;
}

size_t BlockPanelStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [begin, e] : by_begin_)
    if (!e.owner.expired()) n += e.bytes;
  return n;
}

}  // namespace tandem::cpu
