#include "backend/gguf_tiles.h"

#include <atomic>

namespace tandem {

namespace {
std::atomic<bool> g_tiles{true};  // read at every launch, set at start-up (or by a bench)
std::atomic<bool> g_moe_tiles{true};
}  // namespace

bool gguf_tiles() {
  return g_tiles.load(std::memory_order_relaxed);
}

void set_gguf_tiles(bool on) {
  g_tiles.store(on, std::memory_order_relaxed);
}

bool gguf_moe_tiles() {
  return g_moe_tiles.load(std::memory_order_relaxed);
}

void set_gguf_moe_tiles(bool on) {
  g_moe_tiles.store(on, std::memory_order_relaxed);
}

}  // namespace tandem
