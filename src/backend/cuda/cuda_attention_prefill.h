// Which prefill attention kernel runs (host side, for the backend, tests and benches).
// The rule lives in one place, choose_prefill_kernel (cuda_attention_prefill.cu):
//   Sm90 (wgmma, warp-specialized: cuda_attention_prefill_sm90.cu) when the backend's
//     CudaOptions::sm90_prefill is on (TANDEM_ATTN_PREFILL=mma turns it off: the fallback
//     should the sm90 kernel misbehave on a machine), the device is sm_90 (Hopper), the head
//     dim is in (32, 256] (padded to 64 / 128 / 256), and the device's opt-in shared memory
//     per block holds the kernel's buffers (bf16 cache: ~116 KB at d64, ~164 KB at d128,
//     ~196 KB at d256; an e4m3 cache adds a raw staging tile: ~132 / ~196 / ~228 KB, so
//     e4m3 at d256 does not fit an H200's 227 KB);
//   Mma (mma.sync, flash-attention-2: cuda_attention_prefill.cu) otherwise: head dims
//     <= 32 or above 256 (Gemma 4's 512), e4m3 at d256, other GPUs.
// Block size is no criterion for the kernel: both can gather keys row by row.
//
// Inside the Sm90 kernel, how K/V tiles reach shared memory (choose_sm90_loads, same file):
//   Tma (a producer warp per ring issues cp.async.bulk.tensor boxes of paged blocks, tensor
//     maps: cuda_tensor_map.h; the consumer warpgroups take turns, ping-pong) where the
//     cache is bf16, the block size is a power of two >= 8 (a box is min(block size, key
//     tile) rows, so tiles start on box rows and every box lands on a 1024-byte swizzle
//     atom), the head dim is at least one 64-column box and whole 16-byte rows (% 8), and
//     the pool's slots fit TMA's int32 coordinates;
//   CpAsync (128 producer threads, 16-byte cp.async row by row through the table)
//     otherwise: the e4m3 cache (widened by the producer), block sizes such as 12 or below
//     8, head dims < 64.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

enum class PrefillKernel { Mma, Sm90 };

PrefillKernel choose_prefill_kernel(int head_dim, bool kv_f8, const cudaDeviceProp& props,
                                    bool sm90_on);
const char* prefill_kernel_name(PrefillKernel k);

enum class Sm90Loads { CpAsync, Tma };

Sm90Loads choose_sm90_loads(bool kv_f8, int head_dim, int block_size, int64_t num_slots);
const char* sm90_loads_name(Sm90Loads l);

}  // namespace tandem::cuda
