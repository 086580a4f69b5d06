#include "media/content_hash.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace tandem {
namespace {

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// SipHash state: four lanes, updated in place by SipRounds.
struct SipState {
  uint64_t v0, v1, v2, v3;

  explicit SipState(const SipKey& key)
      : v0(key[0] ^ 0x736f6d6570736575ull),
        v1(key[1] ^ 0x646f72616e646f6dull),
        v2(key[0] ^ 0x6c7967656e657261ull),
        v3(key[1] ^ 0x7465646279746573ull) {}

  void round() {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  }
  void compress(uint64_t m) {
    v3 ^= m;
    round(), round();
    v0 ^= m;
  }
  uint64_t finish() {
    v2 ^= 0xff;
    round(), round(), round(), round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

// Feeds bytes in 8-byte words; the tail and the total length close the message.
class SipHasher {
 public:
  explicit SipHasher(const SipKey& key) : state_(key) {}

  void update(const uint8_t* data, size_t size) {
    total_ += size;
    if (pending_size_ > 0) {  // complete the word a previous update left open
      const size_t take = std::min(size, 8 - pending_size_);
      std::memcpy(pending_ + pending_size_, data, take);
      pending_size_ += take, data += take, size -= take;
      if (pending_size_ < 8) return;
      state_.compress(load_le64(pending_));
      pending_size_ = 0;
    }
    for (; size >= 8; data += 8, size -= 8) state_.compress(load_le64(data));
    std::memcpy(pending_, data, size);
    pending_size_ = size;
  }
  uint64_t finish() {
    uint64_t last = uint64_t(total_ & 0xff) << 56;
    for (size_t i = 0; i < pending_size_; ++i) last |= uint64_t(pending_[i]) << (8 * i);
    state_.compress(last);
    return state_.finish();
  }

 private:
  SipState state_;
  uint8_t pending_[8] = {};
  size_t pending_size_ = 0;
  uint64_t total_ = 0;
};

const SipKey& process_key() {
  static const SipKey key = [] {
    std::random_device device;
    auto word = [&] { return (uint64_t(device()) << 32) ^ uint64_t(device()); };
    return SipKey{word(), word()};
  }();
  return key;
}

}  // namespace

uint64_t siphash24(const SipKey& key, const uint8_t* data, size_t size) {
  SipHasher h(key);
  h.update(data, size);
  return h.finish();
}

uint64_t content_hash(const RgbImage& image, const SipKey& key) {
  uint8_t header[16];
  for (int i = 0; i < 8; ++i) {
    header[i] = uint8_t(uint64_t(image.width) >> (8 * i));
    header[8 + i] = uint8_t(uint64_t(image.height) >> (8 * i));
  }
  SipHasher h(key);
  h.update(header, sizeof(header));
  h.update(image.pixels.data(), image.pixels.size());
  return h.finish();
}

uint64_t content_hash(const RgbImage& image) { return content_hash(image, process_key()); }

}  // namespace tandem
