// The grouped expert GEMMs on block-type experts through the shared-memory tiles of the dense
// block linears (cuda_block_tiles.cuh; declared in cuda_moe_gemm.h). A CTA takes one row tile
// of one expert (up to kMoeTileRows = 64 slots, moe_row_tile: the same tiles as the wmma
// kernels of cuda_moe_gemm.cu) and 128 of its weight rows, and walks all of K in steps of 256
// values: each step's weight bytes copied by cp.async, decoded to bf16 in shared memory, the
// slots' x rows gathered by cp.async, then mma.sync. K is never split: a gated output needs
// both of its sums whole, and a step of MoE rows already has a CTA per expert and column tile.
//
// The gated (gate_up) variant takes 64 output columns f0 .. f0 + 64 a CTA, and orders its 128
// weight rows so that each warp's two 16-row fragments are the gate and the up rows of the
// same 16 columns: tile row r = 32w + 16i + j is gate (i = 0) or up (i = 1) row f0 + 16w + j.
// A thread's acc[0][t][e] and acc[1][t][e] are then gate and up of one output element, and
// act(gate) · up is formed in registers.
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_block_tiles.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_moe_gemm.h"
#include "backend/cuda/cuda_moe_tiles.cuh"

namespace tandem::cuda {

namespace {

using namespace block_tiles;
static_assert(kTileM == kMoeTileRows, "a CTA's x rows are one expert row tile");

// The x rows the kernel gathers for each tile (static shared memory beside the tiles').
constexpr int kSrcBytes = kTileM * int(sizeof(int32_t));

struct ExpertTileArgs {
  bf16* out;              // [slots, N]
  const bf16* in;         // [*, K], 16-byte aligned (K a multiple of 8: whole blocks)
  const int32_t* in_row;  // [slots]: the row of `in` each slot reads, or null (slot s: row s)
  const uint8_t* w;       // [E, (gated ? 2 : 1) · N, K] in blocks, 16-byte aligned
  int64_t row_bytes;      // one weight row's bytes
  int N, K;
};

// The output columns of a CTA.
template <bool kGated>
constexpr int kColumns = kGated ? kTileN / 2 : kTileN;

// The expert's weight row of tile row r (columns past N read column N - 1, never stored).
template <bool kGated>
__device__ __forceinline__ int weight_row(int r, int n0, int N) {
  if constexpr (!kGated) return min(n0 + r, N - 1);
  const int f = min(n0 + (r / 32) * 16 + r % 16, N - 1);
  return f + ((r / 16) % 2) * N;
}

// The thread's sums (see mma_step) to the tile's slots: plain, or act(gate) · up.
template <bool kGated, Activation A>
__device__ __forceinline__ void store_expert_tile(const ExpertTileArgs& a,
                                                  const float (&acc)[2][4][4], int n0,
                                                  const MoeRowTile& rt) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  const int wn = warp % kWarpsN, wm = warp / kWarpsN;
#pragma unroll
  for (int t = 0; t < 4; t++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int m = wm * 32 + t * 8 + 2 * (lane % 4) + e % 2;
      if (m >= rt.num_rows) continue;
      bf16* row = a.out + (rt.row0 + m) * a.N;
      const int j = lane / 4 + 8 * (e / 2);
      if constexpr (kGated) {
        const int f = n0 + wn * 16 + j;
        if (f < a.N) row[f] = __float2bfloat16_rn(activate<A>(acc[0][t][e]) * acc[1][t][e]);
      } else {
#pragma unroll
        for (int i = 0; i < 2; i++) {
          const int n = n0 + wn * 32 + i * 16 + j;
          if (n < a.N) row[n] = __float2bfloat16_rn(acc[i][t][e]);
        }
      }
    }
}

// grid: (ceil(N / kColumns), rows.max_row_tiles), block kThreads, dynamic smem Step<T>::kSmem
template <DType T, bool kGated, Activation A>
__global__ void __launch_bounds__(kThreads, 1)
    expert_tiles_kernel(const ExpertTileArgs a, const ExpertRows rows) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ int32_t x_src[kTileM];  // the row of `in` of each tile row; -1 past the slots
  const MoeRowTile rt = moe_row_tile(rows);
  if (rt.expert < 0) return;  // the whole block leaves
  for (int r = int(threadIdx.x); r < kTileM; r += kThreads)
    x_src[r] = r < rt.num_rows ? (a.in_row ? a.in_row[rt.row0 + r] : int32_t(rt.row0 + r)) : -1;
  __syncthreads();
  const Smem<T> sm{smem};
  const int n0 = int(blockIdx.x) * kColumns<kGated>;
  const uint8_t* we = a.w + int64_t(rt.expert) * (kGated ? 2 : 1) * a.N * a.row_bytes;
  const auto row_of = [&](int r) {
    return we + int64_t(weight_row<kGated>(r, n0, a.N)) * a.row_bytes;
  };
  const auto x_row = [&](int r) -> const bf16* {
    return x_src[r] >= 0 ? a.in + int64_t(x_src[r]) * a.K : nullptr;
  };
  float acc[2][4][4] = {};
  load_weights<T>(sm.raw(0), row_of, 0, a.K);
  load_x(sm.xs(0), x_row, a.in, 0, a.K);
  run_steps<T>(sm, acc, row_of, x_row, a.in, 0, (a.K + kStepK - 1) / kStepK, a.K,
               live_columns(int(rt.num_rows)));
  store_expert_tile<kGated, A>(a, acc, n0, rt);
}

template <bool kGated, Activation A>
void launch_tiles(cudaStream_t stream, bf16* out, const bf16* in, const int32_t* in_row,
                  const BlockExperts& w, const ExpertRows& rows, int64_t N, int64_t K) {
  if (rows.max_row_tiles <= 0 || N <= 0) return;
  const dim3 grid = moe_expert_grid(rows, N, kColumns<kGated>);
  const ExpertTileArgs a{out,    in,    in_row, w.w, int64_t(dtype_row_bytes(w.dtype, K)),
                         int(N), int(K)};
  with_block_dtype(w.dtype, [&]<DType T>() {
    static std::atomic<uint64_t> smem_ready{0};
    auto kernel = &expert_tiles_kernel<T, kGated, A>;
    allow_dynamic_smem(reinterpret_cast<const void*>(kernel), Step<T>::kSmem, smem_ready,
                       "moe block tiles");
    kernel<<<grid, kThreads, size_t(Step<T>::kSmem), stream>>>(a, rows);
  });
  TANDEM_CUDA_LAUNCHED(kGated ? "expert_tiles_kernel (gate_up)" : "expert_tiles_kernel (down)");
}

}  // namespace

bool moe_block_tiles_fit(DType dtype, const void* w, size_t smem_optin) {
  int smem = 0;
  with_block_dtype(dtype, [&]<DType T>() { smem = Step<T>::kSmem; });
  return smem > 0 && size_t(smem + kSrcBytes) <= smem_optin && aligned16(w);
}

void launch_moe_gate_up_block_tiles(cudaStream_t stream, bf16* a, const bf16* x,
                                    const int32_t* token, const BlockExperts& gate_up,
                                    const ExpertRows& rows, int64_t D, int64_t F, Activation act) {
  if (act == Activation::SiLU)
    launch_tiles<true, Activation::SiLU>(stream, a, x, token, gate_up, rows, F, D);
  else
    launch_tiles<true, Activation::GeluTanh>(stream, a, x, token, gate_up, rows, F, D);
}

void launch_moe_down_block_tiles(cudaStream_t stream, bf16* y, const bf16* a,
                                 const BlockExperts& down, const ExpertRows& rows, int64_t D,
                                 int64_t F) {
  // The activation parameter is unused by the plain variant.
  launch_tiles<false, Activation::SiLU>(stream, y, a, nullptr, down, rows, D, F);
}

}  // namespace tandem::cuda
