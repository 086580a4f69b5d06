#include "backend/gguf_gemv.h"

#include <atomic>

#include "core/error.h"

namespace tandem {

namespace {
std::atomic<int> g_variant{0};     // read at every launch, set at start-up (or by a bench)
std::atomic<bool> g_tiles{false};  // the same
}  // namespace

int gguf_gemv_variant() {
  return g_variant.load(std::memory_order_relaxed);
}

void set_gguf_gemv_variant(int variant) {
  if (variant < 0 || variant >= kGgufGemvVariants)
    fail("gguf gemv variant {}: expected 0 .. {}", variant, kGgufGemvVariants - 1);
  g_variant.store(variant, std::memory_order_relaxed);
}

bool gguf_tiles() {
  return g_tiles.load(std::memory_order_relaxed);
}

void set_gguf_tiles(bool on) {
  g_tiles.store(on, std::memory_order_relaxed);
}

}  // namespace tandem
