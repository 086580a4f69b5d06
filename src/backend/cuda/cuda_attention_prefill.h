// Which prefill attention kernel runs (host side, for the backend, tests and benches).
// The rule lives in one place, choose_prefill_kernel (cuda_attention_prefill.cu):
//   Sm90 (wgmma, warp-specialized: cuda_attention_prefill_sm90.cu) when the switch below
//     is on, the device is sm_90 (Hopper), the head dim is in (32, 256] (padded to 64 /
//     128 / 256), and the device's opt-in shared memory per block holds the kernel's
//     buffers (bf16 cache: ~116 KB at d64, ~164 KB at d128, ~196 KB at d256; an e4m3
//     cache adds a raw staging tile: ~132 / ~196 / ~228 KB, so e4m3 at d256 does not fit
//     an H200's 227 KB);
//   Mma (mma.sync, flash-attention-2: cuda_attention_prefill.cu) otherwise: head dims
//     <= 32 or above 256 (Gemma 4's 512), e4m3 at d256, other GPUs.
// Block size is no criterion: both kernels gather keys row by row through the table.
#pragma once

#include <cuda_runtime.h>

namespace tandem::cuda {

enum class PrefillKernel { Mma, Sm90 };

PrefillKernel choose_prefill_kernel(int head_dim, bool kv_f8, const cudaDeviceProp& props);
const char* prefill_kernel_name(PrefillKernel k);

// Process-wide, on by default; TANDEM_ATTN_PREFILL=mma starts it off (read once). Tests
// and benches flip it to compare the kernels in one process.
bool sm90_prefill_enabled();
void set_sm90_prefill_enabled(bool on);

}  // namespace tandem::cuda
