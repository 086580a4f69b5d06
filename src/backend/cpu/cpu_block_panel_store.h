// The panels (cpu_block_panels.h) of the block-type weights a CpuBackend uploaded, found from
// the address of any view of them: linear gets the weight Tensor, moe_experts a slice of
// stacked experts, and either finds the panels its rows start at.
//
// The panels REPLACE the ggml bytes of the rows they hold: a weight of N rows keeps its blocks
// only for the rows past its last whole panel (N mod 16 of them). Its Tensor still spans
// [N, K] ggml bytes — views, slices and the lookup work on its addresses as before — but the
// bytes of rows [0, 16·⌊N / 16⌋) are an inaccessible reservation (PROT_NONE: a reader that
// forgot the panels faults instead of reading zeros), so a model holds ~1.06× (Q4_K, Q8_0) to
// ~1.3× (Q6_K) of its blocks' bytes, not 2×. The readers of block weights (linear,
// moe_experts, embedding, to_host_f32) ask the store first: the panels hold every bit of the
// blocks' values (levels, integer scales, f32 copies of the f16 scales), so decode_rows
// gives the f32 values dequantize_row gives, bit for bit, and the exact arithmetic runs over
// them.
//
// A weight's panels live as long as its storage: an entry holds a weak reference to the
// storage it was packed for, and an expired entry is never returned. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cpu/cpu_host_memory.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

// What the store knows of a view w of a weight it packed (all null / 0 when it packed none).
struct PanelLookup {
  const uint8_t* panels = nullptr;  // the weight's panels (panel 0)
  const uint8_t* base = nullptr;    // the weight's row 0 (ggml layout; rows < kept_from absent)
  int64_t rows = 0;                 // the weight's rows
  int64_t row0 = 0;                 // w's first row in the weight
  int64_t kept_from = 0;            // 16·⌊rows / 16⌋: the first row whose blocks are held
  size_t panel_bytes = 0;           // bytes of one panel (16 rows)
  bool found() const { return panels != nullptr; }
  // The panel w's first row starts, where it starts one (else null).
  const void* aligned_panels() const {
    return found() && row0 % 16 == 0 ? panels + size_t(row0 / 16) * panel_bytes : nullptr;
  }
};

class BlockPanelStore {
 public:
  // host's copy for the backend with its panels packed, where its type has panels, it has 16
  // rows or more and K is whole blocks: the returned tensor holds the blocks of its rows past
  // the last whole panel only (see above). Else an undefined Tensor (the caller copies host).
  Tensor upload(ThreadPool& pool, const Tensor& host);

  // The weight w's data lies in, with w's row in it; found() is false when w is not a row of
  // an uploaded weight of the same type and row length whose storage lives.
  PanelLookup find(const Tensor& w) const;

  // Rows [r0, r1) of the weight of `p` (weight rows) as f32, each value as dequantize_row
  // decodes it, into out [r1 − r0, K].
  static void decode_rows(const PanelLookup& p, DType t, int64_t K, int64_t r0, int64_t r1,
                          float* out);

  // Bytes of panels held (for the load's report).
  size_t bytes() const;

 private:
  struct Entry {
    const uint8_t* end = nullptr;  // the weight's bytes [begin, end)
    std::weak_ptr<void> owner;     // the weight's storage
    std::shared_ptr<void> panels;
    DType dtype = DType::F32;
    int64_t K = 0, rows = 0;
    size_t row_bytes = 0, panel_bytes = 0, bytes = 0;
  };
  mutable std::mutex mu_;
  std::map<const uint8_t*, Entry> by_begin_;
  // The panels' own huge pages: sharing the weights' chunks would keep them alive.
  HugePageArena arena_;
};

}  // namespace tandem::cpu
