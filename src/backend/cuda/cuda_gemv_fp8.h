// The FP8 weight stream for linears of 1 to 8 rows: cuda_gemv_fp8.cu. Host header.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_weight_scales.h"

namespace tandem {

class CudaBackend;

// Rows of x the stream takes: the tensor-core mma's 8 columns.
inline constexpr int kFp8GemvMaxRows = 8;

// What the stream runs in its prologue and epilogue besides the product (the fused decode
// chain, issue 45; cuda_stream_input.cuh): x made from `src` by an RMSNorm or a gated
// activation (and written to h), and the product added into out (the residual stream)
// instead of stored. Two forms are built: Norm with a stored out, GatedAct with an added
// one; X (x as given) takes either.
struct Fp8GemvFusion {
  enum class Input : uint8_t { X, Norm, GatedAct };
  Input input = Input::X;
  const Tensor* src = nullptr;        // Norm: [M, K] (what is normed); GatedAct: gate_up [M, 2K]
  const Tensor* norm_w = nullptr;     // Norm: [K] bf16
  float eps = 0.f, offset = 0.f;      // Norm
  Activation act = Activation::SiLU;  // GatedAct
  Tensor* h = nullptr;                // Norm, GatedAct: x [M, K] written there too, or null
  bool add = false;                   // out [M, N] (bf16) += the product
};

struct Fp8GemvArgs {
  const Tensor* x;              // [M, K] bf16, quantized by the kernel (with fusion.input
                                // Norm or GatedAct: its shape; the kernel makes it)
  const float* static_scale;    // [1] (a static input scale, on the device) or null: dynamic
  const Tensor* w;              // [N, K] e4m3
  cuda::WeightScales w_scales;  // Block: [block_n, 128] blocks (fp8_gemv_fits)
  const Tensor* bias;           // [N] bf16 or undefined
  Fp8GemvFusion fusion = {};    // none by default
};

// Whether the stream takes the shape (1–8 rows, K % 16 == 0, x small enough to stage,
// block scales (if any) 128 columns wide, 16-byte aligned). block_k: 0 without block
// scales. Whether the weight streams are switched on is the caller's (CudaOptions::gemv).
bool fp8_gemv_fits(int64_t M, int64_t N, int64_t K, int64_t block_k, const void* x, const void* w);
// Launches it (the caller validated shapes, dtypes and fp8_gemv_fits).
void launch_fp8_gemv(CudaBackend& be, Tensor& out, const Fp8GemvArgs& args);

}  // namespace tandem
