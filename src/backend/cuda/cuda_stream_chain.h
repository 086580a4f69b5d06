// Which weight stream follows which. A few-row decode step launches its FP8 weight streams
// in the same order every step (a layer's qkv, o, gate_up and down, then the next layer's
// qkv), so the order seen once names each stream's successor. A stream's producer warp,
// once its own copies are issued, warms L2 with the start of its CTA's share of the next
// stream's rows (cuda_weight_stream.cuh: prefetch_next) while the small kernels between
// the two linears run and HBM would otherwise sit idle. A stale guess (the order changed)
// costs bandwidth, never a result: a prefetch writes nothing, and weights whose storage is
// gone are never named.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "core/tensor.h"

namespace tandem::cuda {

// The next stream's rows as the kernel sees them (a plain kernel argument).
struct StreamNext {
  const unsigned char* w = nullptr;  // [N, row_bytes], or null: no prefetch
  int64_t row_bytes = 0;
  int N = 0;
  int grid = 0;            // the next stream's CTAs (its row split: stream_work)
  uint32_t cta_bytes = 0;  // at most this many bytes of a CTA's rows
};

class StreamChain {
 public:
  // The stream over w [N, row_bytes] launches now on `grid` CTAs: remembers it as the
  // successor of the stream before and returns w's own successor, seen the last time w
  // ran (none when cta_bytes is 0, w has no storage to watch, or w's successor is gone).
  StreamNext launched(const Tensor& w, int64_t row_bytes, int grid, uint32_t cta_bytes);

 private:
  struct Seen {
    std::weak_ptr<void> storage;
    const void* data = nullptr;
    int64_t row_bytes = 0;
    int N = 0, grid = 0;
  };
  std::unordered_map<const void*, Seen> next_;
  Seen last_;
};

}  // namespace tandem::cuda
