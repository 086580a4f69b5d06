// The row tiles of the grouped expert GEMMs (cuda_moe_gemm.h): which expert's rows a block
// works on, and the launch grid that covers every tile. Shared by the bf16 / block / FP8
// kernels of cuda_moe_gemm.cu and the FP8 tensor-core kernel (cuda_moe_gemm_fp8_mma.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_moe_gemm.h"

namespace tandem::cuda {

// The row tile of block blockIdx.y: its expert, the last e with tile_offsets[e] <= tile
// (experts without rows have empty tile ranges and lose to the next one), its first slot
// and how many of its kMoeTileRows rows are slots; expert -1 past the real tile count.
struct MoeRowTile {
  int expert;
  int64_t row0, num_rows;
};
__device__ __forceinline__ MoeRowTile moe_row_tile(const ExpertRows& rows) {
  const int tile = int(blockIdx.y);
  if (tile >= rows.tile_offsets[rows.num_experts]) return {-1, 0, 0};
  const int e = last_at_most(rows.tile_offsets, rows.num_experts, tile);
  const int64_t row0 = rows.offsets[e] + int64_t(tile - rows.tile_offsets[e]) * kMoeTileRows;
  return {e, row0, min(int64_t(kMoeTileRows), int64_t(rows.offsets[e + 1]) - row0)};
}

// The launch grid of a grouped GEMM with N output columns in tiles of `tile_n`: (column
// tiles, row tiles).
inline dim3 moe_expert_grid(const ExpertRows& rows, int64_t N, int64_t tile_n) {
  if (rows.max_row_tiles > 65535)
    cuda_fail("moe_experts: " + std::to_string(rows.max_row_tiles) +
              " row tiles exceed the grid limit (too many tokens in one step)");
  return dim3(unsigned((N + tile_n - 1) / tile_n), unsigned(rows.max_row_tiles));
}

}  // namespace tandem::cuda
