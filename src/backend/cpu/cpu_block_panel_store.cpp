#include "backend/cpu/cpu_block_panel_store.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "backend/cpu/cpu_block_gemm.h"
#include "core/block_quant.h"
#include "core/error.h"

namespace tandem::cpu {

namespace {

// `bytes` of address space of which only [keep_from, bytes) (widened down to its page) is
// memory; the rest is a PROT_NONE reservation that costs nothing and faults if read.
std::shared_ptr<void> map_kept_tail(size_t bytes, size_t keep_from) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t size = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    fail("out of host memory reserving {} bytes for a block weight: {}", size,
         std::strerror(errno));
  const size_t from = keep_from / page * page;
  if (from < size &&
      mprotect(static_cast<char*>(p) + from, size - from, PROT_READ | PROT_WRITE) != 0) {
    const int err = errno;
    munmap(p, size);
    fail("out of host memory mapping {} bytes of a block weight: {}", size - from,
         std::strerror(err));
  }
  return std::shared_ptr<void>(p, [size](void* q) { munmap(q, size); });
}

}  // namespace

Tensor BlockPanelStore::upload(ThreadPool& pool, const Tensor& host) {
  if (!host.defined() || !block_panels_supported(host.dtype) || host.ndim() < 2) return {};
  const int64_t rows = host.rows(), K = host.cols();
  if (rows < 16 || K % dtype_block(host.dtype).elems != 0) return {};
  Entry e;
  e.dtype = host.dtype;
  e.K = K;
  e.rows = rows;
  e.row_bytes = dtype_row_bytes(host.dtype, K);
  e.panel_bytes = block_panels_bytes(host.dtype, 16, K);
  e.bytes = block_panels_bytes(host.dtype, rows, K);
  e.panels = arena_.allocate(e.bytes);
  pack_block_panels(pool, host.dtype, host.data, rows, K, e.panels.get());
  // The blocks of the rows past the last whole panel: the row kernels read them.
  const size_t kept = size_t(rows / 16 * 16) * e.row_bytes;
  Tensor out;
  out.dtype = host.dtype;
  out.shape = host.shape;
  out.storage = map_kept_tail(host.nbytes(), kept);
  out.data = out.storage.get();
  std::memcpy(static_cast<char*>(out.data) + kept, static_cast<const char*>(host.data) + kept,
              host.nbytes() - kept);
  e.owner = out.storage;
  const auto* begin = static_cast<const uint8_t*>(out.data);
  e.end = begin + out.nbytes();
  std::lock_guard<std::mutex> lock(mu_);
  // Drop what the new weight overlaps (released memory handed out again) and what expired.
  for (auto it = by_begin_.begin(); it != by_begin_.end();) {
    const bool overlaps = it->first < e.end && begin < it->second.end;
    it = overlaps || it->second.owner.expired() ? by_begin_.erase(it) : std::next(it);
  }
  by_begin_.emplace(begin, std::move(e));
  return out;
}

PanelLookup BlockPanelStore::find(const Tensor& w) const {
  const auto* p = static_cast<const uint8_t*>(w.data);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_begin_.upper_bound(p);
  if (it == by_begin_.begin()) return {};
  --it;
  const Entry& e = it->second;
  if (p >= e.end || e.dtype != w.dtype || e.K != w.cols() || e.owner.expired()) return {};
  const size_t offset = size_t(p - it->first);
  if (offset % e.row_bytes != 0) return {};
  PanelLookup l;
  l.panels = static_cast<const uint8_t*>(e.panels.get());
  l.base = it->first;
  l.rows = e.rows;
  l.row0 = int64_t(offset / e.row_bytes);
  l.kept_from = e.rows / 16 * 16;
  l.panel_bytes = e.panel_bytes;
  return l;
}

void BlockPanelStore::decode_rows(const PanelLookup& p, DType t, int64_t K, int64_t r0, int64_t r1,
                                  float* out) {
  const int64_t split = std::clamp(p.kept_from, r0, r1);
  if (split > r0) unpack_block_panels_f32(t, p.panels, K, r0, split, out);
  const size_t row_bytes = dtype_row_bytes(t, K);
  for (int64_t r = split; r < r1; r++)
    dequantize_row(t, p.base + size_t(r) * row_bytes, out + (r - r0) * K, K);
}

size_t BlockPanelStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [begin, e] : by_begin_)
    if (!e.owner.expired()) n += e.bytes;
  return n;
}

}  // namespace tandem::cpu
