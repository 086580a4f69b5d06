// EncoderCache: the soft tokens of images already encoded (Model::encode_images), by the
// image's content hash, so that a row recomputed after a preemption, a later turn that
// misses the prefix cache, or a second request with the same picture does not run the
// vision tower again. Bounded in bytes: the least recently used entries go first, never
// one the current step needs (a step whose own images exceed the bound still runs; the
// cache shrinks back after it).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "media/image_input.h"

namespace tandem {

class EncoderCache {
 public:
  // Encodes images together: [Σ num_soft_tokens, D], image i's rows after image i-1's.
  using Encoder = std::function<Tensor(std::span<const ImageInput* const>)>;

  // Entries are device tensors of `backend`'s, each in storage of its own (so evicting
  // one frees its bytes).
  EncoderCache(Backend& backend, int64_t capacity_bytes)
      : backend_(&backend), capacity_(capacity_bytes) {}

  // The soft tokens of each of `images` ([num_soft_tokens, D] each, in order), encoding the
  // ones not cached (each content once) in one call of `encode`.
  std::vector<Tensor> get(std::span<const ImageInput* const> images, const Encoder& encode);

  int64_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }
  int64_t num_encoded() const { return num_encoded_; }  // images encoded since construction
  // Timing of the encoder: wall time of each encode call, summed. On a device that runs
  // asynchronously an encode is timed only when `synchronize` asks to wait for the device
  // before and after it (two waits per encoding step: TANDEM_VISION_TIMING); a synchronous
  // (CPU) backend is timed as it runs. encode_seconds() is nullopt when nothing is timed.
  void set_timing(bool timed, bool synchronize) {
    timed_ = timed;
    synchronize_ = synchronize;
  }
  std::optional<double> encode_seconds() const {
    return timed_ ? std::optional<double>(encode_seconds_) : std::nullopt;
  }

 private:
  struct Entry {
    uint64_t hash = 0;
    Tensor rows;
  };
  // Drops least recently used entries (none of `keep`) until the bytes fit.
  void evict(const std::vector<uint64_t>& keep);

  Backend* backend_;
  int64_t capacity_;
  int64_t bytes_ = 0;
  int64_t num_encoded_ = 0;
  bool timed_ = false;
  bool synchronize_ = false;
  double encode_seconds_ = 0;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> by_hash_;
};

}  // namespace tandem
