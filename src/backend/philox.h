// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011): a counter-based generator. The output is a pure function of (counter, key),
// so any draw of any stream can be computed directly, in any order, on any thread — the
// host and the device get the same bits. This is what makes sampling reproducible per
// request (seed, tokens generated so far) whatever else runs, on either backend.
//
// Usable from host code and from CUDA device code (the functions are __host__ __device__
// under nvcc); integer arithmetic only, so both compute bit-identical results.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem {

struct Philox4x32 {
  uint32_t v[4];
};

namespace philox_detail {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

// One round: two 32x32 -> 64 multiplies, their halves permuted and xored with the key.
TANDEM_HOST_DEVICE inline void philox_round(uint32_t c[4], uint32_t k0, uint32_t k1) {
  uint64_t p0 = uint64_t(kMul0) * c[0];
  uint64_t p1 = uint64_t(kMul1) * c[2];
  uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
  uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
  uint32_t n0 = hi1 ^ c[1] ^ k0;
  uint32_t n2 = hi0 ^ c[3] ^ k1;
  c[0] = n0;
  c[1] = lo1;
  c[2] = n2;
  c[3] = lo0;
}

}  // namespace philox_detail

// The 128-bit block for `counter` under `key` (10 rounds; the key advances by the Weyl
// constants between rounds).
TANDEM_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0,
                                                   uint32_t key1) {
  uint32_t c[4] = {counter.v[0], counter.v[1], counter.v[2], counter.v[3]};
  for (int r = 0; r < 10; r++) {
    philox_detail::philox_round(c, key0, key1);
    key0 += philox_detail::kWeyl0;
    key1 += philox_detail::kWeyl1;
  }
  return Philox4x32{{c[0], c[1], c[2], c[3]}};
}

// A uniform double in the open interval (0, 1), 52 random bits: (x + 0.5) / 2^52, exact.
// Stream `seed` (the key), draw `counter`, and `index` picks one of many independent
// values of that draw (sampling uses one per vocabulary entry). Two values come from each
// Philox block: index i uses words 2(i & 1) and 2(i & 1) + 1 of block i >> 1.
TANDEM_HOST_DEVICE inline double philox_uniform(uint64_t seed, uint64_t counter,
                                                uint64_t index = 0) {
  uint64_t block = index >> 1;
  Philox4x32 ctr{{uint32_t(counter), uint32_t(counter >> 32), uint32_t(block),
                  uint32_t(block >> 32)}};
  Philox4x32 out = philox4x32_10(ctr, uint32_t(seed), uint32_t(seed >> 32));
  int w = int(index & 1) * 2;
  uint64_t bits = (uint64_t(out.v[w]) << 32 | out.v[w + 1]) >> 12;  // 52 bits
  return (double(bits) + 0.5) * (1.0 / 4503599627370496.0);        // 2^-52
}

}  // namespace tandem
