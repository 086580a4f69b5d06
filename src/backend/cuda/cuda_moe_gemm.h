// The expert GEMMs of moe_experts: a grouped GEMM over rows already sorted by expert
// (cuda_moe.cu sorts them). Expert e owns the row "slots" [offsets[e], offsets[e+1]); its
// rows are cut into tiles of kMoeTileRows, and tile_offsets[e] numbers its first tile, so
// one launch covers every expert whatever the counts — the counts stay on the device and
// the launch is graph-capturable. The grid is sized by a host upper bound on the tiles;
// blocks past the real count exit at once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace tandem::cuda {

constexpr int kMoeTileRows = 64;

// Where each expert's rows lie (device arrays filled by the routing kernel).
struct ExpertRows {
  const int32_t* offsets;       // [E + 1]: slots of expert e are [offsets[e], offsets[e+1])
  const int32_t* tile_offsets;  // [E + 1]: row tiles of expert e start at tile_offsets[e]
  int num_experts;
  int64_t max_row_tiles;  // host bound >= tile_offsets[E]
};

// a[s, f] = act(x[token[s]] · gate_e[f]) * (x[token[s]] · up_e[f]), e the expert of slot s.
//   a [slots, F], x [T, D], token [slots], gate_up [E, 2F, D] (gate rows, then up rows)
void launch_moe_gate_up(cudaStream_t stream, __nv_bfloat16* a, const __nv_bfloat16* x,
                        const int32_t* token, const __nv_bfloat16* gate_up, const ExpertRows& rows,
                        int64_t D, int64_t F, Activation act);

// y[s, d] = a[s] · down_e[d], e the expert of slot s.
//   y [slots, D], a [slots, F], down [E, D, F]
void launch_moe_down(cudaStream_t stream, __nv_bfloat16* y, const __nv_bfloat16* a,
                     const __nv_bfloat16* down, const ExpertRows& rows, int64_t D, int64_t F);

}  // namespace tandem::cuda
