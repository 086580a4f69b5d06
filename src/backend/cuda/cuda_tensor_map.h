// TMA tensor maps (host side): of the paged K/V cache, for the Hopper prefill kernel's TMA
// producer (cuda_attention_prefill_sm90.cu), and of row-major byte matrices, for the FP8
// GEMM (cuda_gemm_fp8_sm90.cu). cuTensorMapEncodeTiled is a driver function; it is
// reached through cudaGetDriverEntryPointByVersion, so nothing links against libcuda.
//
// A bf16 cache tensor [num_blocks · block_size slots][num_kv_heads][head_dim] is mapped as
// the 3-d tensor (head_dim, num_kv_heads, slots), innermost first, with boxes of
// (64 columns, 1 head, box_rows slots) and CU_TENSOR_MAP_SWIZZLE_128B: one box lands as
// box_rows x 128 swizzled bytes, the layout wgmma reads (cuda_attention_sm90.cuh).
// Columns past head_dim and slots past the pool read as zeros (the tensor's bounds).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace tandem::cuda {

struct KvMapShape {
  const void* base = nullptr;  // the cache tensor (16-byte aligned)
  int head_dim = 0, num_kv_heads = 0, box_rows = 0;
  int64_t num_slots = 0;  // num_blocks · block_size
  bool operator==(const KvMapShape&) const = default;
};

// The map of one cache tensor, encoded on first use and kept: the pool never moves (CUDA
// graphs rely on that too), so a layer's K and V maps are encoded once per process.
// Thread-safe; fails (cuda_fail) when the driver refuses the shape.
CUtensorMap kv_tensor_map(const KvMapShape& shape);

// A row-major matrix of 1-byte elements (e4m3) [rows, cols], cols contiguous, mapped as the
// 2-d tensor (cols, rows) with boxes of 128 columns x box_rows rows and
// CU_TENSOR_MAP_SWIZZLE_128B: a box lands as box_rows x 128 swizzled bytes, the K-major
// layout wgmma reads (cuda_sm90.cuh). Columns and rows past the matrix read as zeros.
// Needs a 16-byte aligned base, cols % 16 == 0 and box_rows in [1, 256]. Encoded on every
// call (a few hundred ns of host time, no device work), so activations may move.
CUtensorMap byte_matrix_tensor_map(const void* base, int64_t rows, int64_t cols, int box_rows);

}  // namespace tandem::cuda
