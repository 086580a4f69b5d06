// Private to cuda_lora*.cu: what the LoRA dispatcher (cuda_lora.cu) and the tensor-core
// kernels (cuda_lora_mma.cu) share. Both kernel pairs meet at one layout, the shrink's
// partial sums p [parts, T, R] f32 (one part per slice of K), so either shrink can feed
// either expand.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/step_tensors.h"

namespace tandem::cuda {

constexpr int kLoraMaxShards = 4;

// The shards of a fused projection (LinearLora::shard_ends), by value for the kernels.
struct LoraShards {
  int64_t ends[kLoraMaxShards];
  int count;
  int rank;  // columns of R per shard: R / count
};

// The step's adapter tokens (LoraRows) as the kernels read them; T = the step's tokens.
struct LoraTokens {
  const int32_t* order;
  const int32_t* order_slots;
  const int32_t* num_active;
  int T;
  const int32_t* tiles;  // LoraRows::tiles, or null (the CUDA-core kernels do without)
  int max_tiles;         // the most tiles a step of T tokens on this bank can have
};

// Tensor-core shrink: p [parts, T, R] over slices of kLoraMmaSliceK columns.
constexpr int kLoraMmaSliceK = 512;
bool lora_mma_shrink_fits(int64_t K, const void* x, const void* a);
void launch_lora_mma_shrink(cudaStream_t stream, float* p, const __nv_bfloat16* x,
                            const __nv_bfloat16* a, const LoraTokens& tokens, int R, int64_t K);

// Tensor-core expand: out[t] += B[s] · Σ_z p[z][i] for each sorted adapter token.
bool lora_mma_expand_fits(int64_t N, int R, const LoraShards& shards, const void* b);
void launch_lora_mma_expand(cudaStream_t stream, __nv_bfloat16* out, const float* p, int parts,
                            const __nv_bfloat16* b, const LoraTokens& tokens, int R, int64_t N,
                            const LoraShards& shards);

}  // namespace tandem::cuda
