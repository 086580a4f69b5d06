// Fast, deterministic random weights for benchmark models (`tandem random-model`).
//
// Element i of a stream is a pure function of (seed, i): a counter-based hash, so the
// output does not depend on how the work is split across threads, and any slice of a
// tensor can be generated on its own (`first` = index of dst[0] in the stream).
// Values are approximately normal: the sum of four 16-bit uniforms (Irwin–Hall, n = 4),
// scaled to mean 0 and standard deviation `stddev`; they are bounded by ±2√3·stddev,
// which is what random init wants anyway (no outliers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/dtype.h"

namespace tandem {

// Fill n elements in parallel on ThreadPool::global() (not re-entrant: do not call from
// inside a parallel_for).
void fill_random_f32(void* dst, size_t n, uint64_t seed, float stddev, uint64_t first = 0);
void fill_random_bf16(void* dst, size_t n, uint64_t seed, float stddev, uint64_t first = 0);
void fill_random_f16(void* dst, size_t n, uint64_t seed, float stddev, uint64_t first = 0);
// Dispatches on dtype (F32, BF16, F16; I32 is an error).
void fill_random(void* dst, DType dtype, size_t n, uint64_t seed, float stddev, uint64_t first = 0);

// A SafetensorsWriter::ChunkFill producing this stream for one tensor: bytes
// [offset, offset + bytes) hold elements offset / size, ... of the stream.
std::function<void(void* dst, size_t offset, size_t bytes)> random_chunk_fill(DType dtype,
                                                                              uint64_t seed,
                                                                              float stddev);

// The single value the fills above produce at index i, in f32 (for tests and references).
float random_normal_at(uint64_t seed, uint64_t i, float stddev);

}  // namespace tandem
