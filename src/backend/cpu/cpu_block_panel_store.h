// The panels (cpu_block_panels.h) of the block-type weights a CpuBackend uploaded, found from
// the address of any view of them: linear gets the weight Tensor, moe_experts a slice of
// stacked experts, and either finds the panels its rows start at.
//
// A weight's panels live as long as its storage: an entry holds a weak reference to the
// storage it was packed from, and an expired entry is never returned (memory a storage
// releases may come back for another tensor). Entries a new upload overlaps are dropped.
// Thread-safe.
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

class BlockPanelStore {
 public:
  // Packs the panels of w, a block-type weight just uploaded (its rows the product of its
  // leading dims, K its last), where its type has panels and it has 16 rows or more; else
  // nothing.
  void add(ThreadPool& pool, const Tensor& w);

  // The panels w's first row starts: null unless w's data is a row of an added weight at a
  // multiple of 16 rows from its start, of the same type and row length, whose storage lives.
  const void* find(const Tensor& w) const;

  // Bytes of panels held (for the load's report).
  size_t bytes() const;

 private:
  struct Entry {
    const uint8_t* end = nullptr;  // the weight's bytes [begin, end)
    std::weak_ptr<void> owner;     // the weight's storage
    std::shared_ptr<void> panels;
    DType dtype = DType::F32;
    int64_t K = 0;
    size_t row_bytes = 0, panel_bytes = 0, bytes = 0;
  };
  mutable std::mutex mu_;
  std::map<const uint8_t*, Entry> by_begin_;
  // The panels' own huge pages: sharing the weights' chunks would keep them alive.
  HugePageArena arena_;
};

}  // namespace tandem::cpu
