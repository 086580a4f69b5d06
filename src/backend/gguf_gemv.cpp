#include "backend/gguf_gemv.h"

#include <atomic>

#include "core/error.h"

namespace tandem {

namespace {
std::atomic<int> g_variant{0};  // read at every launch, set at start-up (or by a bench)
}  // namespace

int gguf_gemv_variant() {
  return g_variant.load(std::memory_order_relaxed);
}

void set_gguf_gemv_variant(int variant) {
  if (variant < 0 || variant >= kGgufGemvVariants)
    fail("gguf gemv variant {}: expected 0 .. {}", variant, kGgufGemvVariants - 1);
  g_variant.store(variant, std::memory_order_relaxed);
}

}  // namespace tandem
