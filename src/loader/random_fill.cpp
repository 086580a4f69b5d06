#include "loader/random_fill.h"

#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace tandem {
namespace {

// Below this many elements a fill runs on the calling thread: waking the pool costs more.
constexpr size_t kMinParallel = size_t(1) << 16;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A 32-bit bijective hash with strong avalanche (two multiply-xorshift rounds). 32-bit
// multiplies vectorize on AVX2, which is what makes the fill run at memory speed.
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

struct StreamKeys {
  uint32_t block;  // key for the high 32 bits of the index
  uint32_t k1, k2;
};

StreamKeys keys_for(uint64_t seed) {
  uint64_t state = seed;
  uint64_t a = splitmix64(state), b = splitmix64(state);
  return {uint32_t(a), uint32_t(a >> 32), uint32_t(b)};
}

// The sum of four 16-bit uniforms has mean 2·65535 and variance (65536² − 1)/3; this is
// 1 / sqrt of that variance, so centered_at(...) * kInvStd has unit variance.
constexpr float kInvStd = 2.6428997921303014e-05f;

// The centered sum at index (hi << 32 | lo), where block_key = mix32(hi ^ keys.block).
inline float centered_at(uint32_t block_key, const StreamKeys& keys, uint32_t lo) {
  uint32_t a = mix32(lo ^ block_key);
  uint32_t h1 = mix32(a + keys.k1), h2 = mix32(a ^ keys.k2);
  uint32_t u = (h1 & 0xffffu) + (h1 >> 16) + (h2 & 0xffffu) + (h2 >> 16);
  return float(int32_t(u) - 131070);
}

// Round-to-nearest-even to bf16 for finite values (these fills never make NaN/Inf), kept
// branch-free so the loop vectorizes.
inline uint16_t finite_f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// Writes stream elements [first + begin, first + end) to out[begin, end) via store(i, v).
template <typename Store>
void fill_range(const StreamKeys& keys, uint64_t first, size_t begin, size_t end, float stddev,
                Store store) {
  const float scale = kInvStd * stddev;
  size_t i = begin;
  while (i < end) {
    uint64_t index = first + i;
    uint32_t lo = uint32_t(index);
    uint32_t block_key = mix32(uint32_t(index >> 32) ^ keys.block);
    size_t count = std::min<uint64_t>(end - i, (uint64_t(1) << 32) - lo);  // stay in one block
    for (size_t j = 0; j < count; j++)
      store(i + j, centered_at(block_key, keys, lo + uint32_t(j)) * scale);
    i += count;
  }
}

template <typename Store>
void fill_parallel(size_t n, uint64_t seed, float stddev, uint64_t first, Store store) {
  StreamKeys keys = keys_for(seed);
  auto run = [&](int64_t begin, int64_t end) {
    fill_range(keys, first, size_t(begin), size_t(end), stddev, store);
  };
  if (n < kMinParallel)
    run(0, int64_t(n));
  else
    ThreadPool::global().parallel_for(int64_t(n), run);
}

}  // namespace

void fill_random_f32(void* dst, size_t n, uint64_t seed, float stddev, uint64_t first) {
  float* out = static_cast<float*>(dst);
  fill_parallel(n, seed, stddev, first, [out](size_t i, float v) { out[i] = v; });
}

void fill_random_bf16(void* dst, size_t n, uint64_t seed, float stddev, uint64_t first) {
  uint16_t* out = static_cast<uint16_t*>(dst);
  fill_parallel(n, seed, stddev, first,
                [out](size_t i, float v) { out[i] = finite_f32_to_bf16(v); });
}

void fill_random_f16(void* dst, size_t n, uint64_t seed, float stddev, uint64_t first) {
  uint16_t* out = static_cast<uint16_t*>(dst);
  fill_parallel(n, seed, stddev, first, [out](size_t i, float v) { out[i] = f32_to_f16(v); });
}

void fill_random(void* dst, DType dtype, size_t n, uint64_t seed, float stddev, uint64_t first) {
  switch (dtype) {
    case DType::F32:
      return fill_random_f32(dst, n, seed, stddev, first);
    case DType::BF16:
      return fill_random_bf16(dst, n, seed, stddev, first);
    case DType::F16:
      return fill_random_f16(dst, n, seed, stddev, first);
    default:
      fail("fill_random: cannot fill an {} tensor with normal values", dtype_name(dtype));
  }
}

std::function<void(void*, size_t, size_t)> random_chunk_fill(DType dtype, uint64_t seed,
                                                             float stddev) {
  if (dtype == DType::I32) fail("random_chunk_fill: cannot fill an I32 tensor with normal values");
  return [=](void* dst, size_t offset, size_t bytes) {
    size_t size = dtype_size(dtype);
    fill_random(dst, dtype, bytes / size, seed, stddev, offset / size);
  };
}

float random_normal_at(uint64_t seed, uint64_t i, float stddev) {
  StreamKeys keys = keys_for(seed);
  uint32_t block_key = mix32(uint32_t(i >> 32) ^ keys.block);
  return centered_at(block_key, keys, uint32_t(i)) * (kInvStd * stddev);
}

}  // namespace tandem
