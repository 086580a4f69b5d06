// Linears and embeddings with ggml block-type weights (cuda_block_linear.h), two paths by
// the step's rows M:
//   M <= 8: a weight stream with 8-bit activations, llama.cpp's arithmetic (its mmvq): x is
//     quantized per 32 values (q = round(x / d), d = max|x| / 127; quantize_x_kernel), and each
//     lane of a warp takes 32 consecutive values (4 octets, cuda_block_decode.cuh) of two weight
//     rows per 1024 against every x row: two dp4a an octet for Σ u·q, then
//         y += d_x · s · Σ u·q + (b − s·o) · d_x · Σ q
//     (every level u < 128, so dp4a's signed bytes hold the unsigned ones too). The rows'
//     bytes are read once for all M rows. One or two rows of Q4_K, Q5_K and Q6_K take the
//     split-K form of this stream instead (cuda_block_gemv_split.cu: a CTA's warps share K,
//     each lane reading its bytes once), measured faster there.
//   9–64 rows (kBlockTilesMaxRows): the tensor-core tiles that decode the weight in shared
//     memory (cuda_block_tiles.cu), never into an HBM copy, unless TANDEM_GGUF_TILES=0.
//   beyond: the weight decoded to bf16 (in chunks of rows, so the copy stays under
//     kDecodedChunkBytes), then the bf16 linear (cuBLASLt).
// Measured on an H100 at the 8B layer shapes (bench/cuda_gguf_bench, bench/RESULTS.md
// 2026-12-06 third session): 32-value lanes over two rows a warp stream Q4_K at 1.53 TB/s
// where octet lanes over one row read 0.89 (more loads in flight per warp); the decoded
// copy runs 9–128 rows 3.6–4.6× faster than tensor-core tiles decoding weights in shared
// memory, which the grouped expert GEMM still uses.
// Both launch through launch_pdl and allocate from the backend (graph-capturable).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_block_decode.cuh"
#include "backend/cuda/cuda_block_gemv_split.h"
#include "backend/cuda/cuda_block_linear.h"
#include "backend/cuda/cuda_block_tiles.h"
#include "backend/gguf_tiles.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.cuh"
#include "backend/cuda/cuda_pdl.cuh"

namespace tandem {

namespace {

using cuda::bf16;
using cuda::Octet;
using cuda::Octets;

constexpr int kGemvWarps = 4;        // warps per CTA
constexpr int kGemvRowsPerWarp = 2;  // weight rows a warp streams together

// ---------------------------------------------------------------- kernels

// x [M, K] bf16 -> xq [M, K] int8, dx [M, K / 32] (each 32 values' d), xs [M, K / 8] (d · Σ q
// over each octet). K % 32 == 0, so a warp is one block of 32 values, whole or absent.
// grid: (M, ceil(K / 256)), block 256
__global__ void quantize_x_kernel(int8_t* __restrict__ xq, float* __restrict__ dx,
                                  float* __restrict__ xs, const bf16* __restrict__ x, int K) {
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int m = int(blockIdx.x), k = int(blockIdx.y) * 256 + int(threadIdx.x), lane = k & 31;
  if (k - lane >= K) return;  // the whole warp
  const float v = __bfloat162float(x[int64_t(m) * K + k]);
  const float d = cuda::warp_max(fabsf(v)) / 127.f, id = d > 0.f ? 1.f / d : 0.f;
  const int q = int(fminf(fmaxf(roundf(v * id), -127.f), 127.f));
  int s = q;
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  s += __shfl_xor_sync(0xffffffffu, s, 2);
  s += __shfl_xor_sync(0xffffffffu, s, 4);
  xq[int64_t(m) * K + k] = int8_t(q);
  if (lane == 0) dx[int64_t(m) * (K / 32) + k / 32] = d;
  if (lane % 8 == 0) xs[int64_t(m) * (K / 8) + k / 8] = d * float(s);
}

// out [rows, N] = x · W'ᵀ (+ bias) from x's quantized form; rows <= M.
//   w [N, K] in blocks of T, xq [rows, K], dx [rows, K / 32], xs [rows, K / 8], bias [N] or null.
// Each lane takes 32 consecutive values (4 octets: one scale run for every type but Q6_K's
// two) of R weight rows per 1024, so a warp has R · 4 octet loads in flight per step.
// grid: ceil(N / (kGemvWarps · R)), block kGemvWarps · 32
template <DType T, int M, int R>
__global__ void __launch_bounds__(kGemvWarps * 32)
    block_gemv_kernel(void* __restrict__ out, bool out_f32, const uint8_t* __restrict__ w,
                      const int8_t* __restrict__ xq, const float* __restrict__ dx,
                      const float* __restrict__ xs, const bf16* __restrict__ bias, int rows, int N,
                      int K) {
  using O = Octets<T>;
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int lane = int(threadIdx.x) & 31;
  const int n0 = (int(blockIdx.x) * kGemvWarps + int(threadIdx.x) / 32) * R;
  if (n0 >= N) return;
  const int64_t row_bytes = int64_t(K / O::kElems) * O::kBytes;
  const uint8_t* wr[R];
#pragma unroll
  for (int r = 0; r < R; r++) wr[r] = w + int64_t(min(n0 + r, N - 1)) * row_bytes;
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int m = 0; m < M; m++) acc[r][m] = 0.f;
#pragma unroll 4
  for (int k = 32 * lane; k < K; k += 1024) {
    const int64_t block = (k / O::kElems) * O::kBytes;
    const int o0 = (k % O::kElems) / 8;
    Octet q[R][4];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int j = 0; j < 4; j++) q[r][j] = O::get(wr[r] + block, o0 + j);
#pragma unroll
    for (int m = 0; m < M; m++) {
      if (m >= rows) break;
      const uint4* xv = reinterpret_cast<const uint4*>(xq + int64_t(m) * K + k);
      const uint4 x0 = xv[0], x1 = xv[1];
      const float d = dx[int64_t(m) * (K / 32) + k / 32];
      const float4 s4 = *reinterpret_cast<const float4*>(xs + int64_t(m) * (K / 8) + k / 8);
      const int xw[8] = {int(x0.x), int(x0.y), int(x0.z), int(x0.w),
                         int(x1.x), int(x1.y), int(x1.z), int(x1.w)};
      const float xsum[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
      for (int r = 0; r < R; r++) {
        float a = acc[r][m];
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int isum =
              __dp4a(int(q[r][j].lv[0]), xw[2 * j], __dp4a(int(q[r][j].lv[1]), xw[2 * j + 1], 0));
          a = fmaf(d * q[r][j].s, float(isum), a);
          a = fmaf(q[r][j].b - q[r][j].s * float(O::kOffset), xsum[j], a);
        }
        acc[r][m] = a;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int n = n0 + r;
#pragma unroll
    for (int m = 0; m < M; m++) {
      if (m >= rows) break;
      float s = cuda::warp_sum(acc[r][m]);
      if (lane != 0 || n >= N) continue;
      if (bias != nullptr) s += __bfloat162float(bias[n]);
      if (out_f32)
        static_cast<float*>(out)[int64_t(m) * N + n] = s;
      else
        static_cast<bf16*>(out)[int64_t(m) * N + n] = __float2bfloat16_rn(s);
    }
  }
}

// out[r] = the values of weight row (ids ? ids[r] : r) · scale, as bf16; an id outside [0, V)
// gives zeros.   out [R, K], w [V, K] in blocks of T, ids [R] or null
// grid: any (grid-stride over octets), block 256
template <DType T>
__global__ void decode_rows_kernel(bf16* __restrict__ out, const uint8_t* __restrict__ w,
                                   const int32_t* __restrict__ ids, int64_t R, int64_t V, int K,
                                   float scale) {
  using O = Octets<T>;
  cuda::pdl_launch_next();
  cuda::pdl_wait();
  const int64_t row_bytes = int64_t(K / O::kElems) * O::kBytes, octets = K / 8;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < R * octets;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / octets;
    const int k = int(i % octets) * 8;
    const int64_t id = ids != nullptr ? int64_t(ids[r]) : r;
    float v[8] = {};
    if (id >= 0 && id < V) {
      cuda::octet_values<T>(
          O::get(w + id * row_bytes + (k / O::kElems) * O::kBytes, (k % O::kElems) / 8), v);
#pragma unroll
      for (int j = 0; j < 8; j++) v[j] *= scale;
    }
    cuda::store_pack(out + r * K + k, v);
  }
}

// ---------------------------------------------------------------- launchers

template <int M>
void launch_gemv(CudaBackend& be, Tensor& out, const Tensor& w, const Tensor& xq, const Tensor& dx,
                 const Tensor& xs, const Tensor& bias, int rows) {
  const int N = int(w.dim(0)), K = int(w.dim(1));
  const unsigned grid = unsigned(cuda::ceil_div(N, kGemvWarps * kGemvRowsPerWarp));
  cuda::with_block_dtype(w.dtype, [&]<DType T>() {
    cuda::launch_pdl("block_gemv_kernel", &block_gemv_kernel<T, M, kGemvRowsPerWarp>, dim3(grid),
                     dim3(kGemvWarps * 32), 0, be.stream(), out.data, out.dtype == DType::F32,
                     w.ptr<uint8_t>(), xq.ptr<int8_t>(), dx.ptr<float>(), xs.ptr<float>(),
                     bias.defined() ? bias.ptr<bf16>() : nullptr, rows, N, K);
  });
}

void gemv(CudaBackend& be, Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias) {
  const int64_t M = x.rows(), K = w.dim(1);
  Tensor xq = be.alloc(DType::I32, {M, K / 4});  // int8 [M, K]
  Tensor dx = be.alloc(DType::F32, {M, K / 32}), xs = be.alloc(DType::F32, {M, K / 8});
  cuda::launch_pdl("quantize_x_kernel", &quantize_x_kernel,
                   dim3(unsigned(M), unsigned(cuda::ceil_div(K, 256))), dim3(256), 0, be.stream(),
                   reinterpret_cast<int8_t*>(xq.data), dx.ptr<float>(), xs.ptr<float>(),
                   x.ptr<bf16>(), int(K));
  const int rows = int(M);
  // 1–2 rows of a k-quant: the split-K stream (cuda_block_gemv_split.cu), measured faster.
  const GemvX qx{reinterpret_cast<const int8_t*>(xq.data), dx.ptr<float>(), xs.ptr<float>(), rows};
  if (gemv_split(be, out, w, qx, bias)) return;
  if (M == 1) return launch_gemv<1>(be, out, w, xq, dx, xs, bias, rows);
  if (M == 2) return launch_gemv<2>(be, out, w, xq, dx, xs, bias, rows);
  if (M <= 4) return launch_gemv<4>(be, out, w, xq, dx, xs, bias, rows);
  launch_gemv<8>(be, out, w, xq, dx, xs, bias, rows);
}

// out [R, K] bf16 = rows of w (ids ? ids : 0 .. R − 1) decoded, times scale.
void decode_rows(CudaBackend& be, Tensor& out, const Tensor& w, const int32_t* ids, float scale) {
  const int64_t R = out.rows(), K = w.dim(1);
  if (R == 0) return;
  const unsigned grid = cuda::grid_stride_blocks(R * (K / 8), 256);
  cuda::with_block_dtype(w.dtype, [&]<DType T>() {
    cuda::launch_pdl("decode_rows_kernel", &decode_rows_kernel<T>, dim3(grid), dim3(256), 0,
                     be.stream(), out.ptr<bf16>(), w.ptr<uint8_t>(), ids, R, w.dim(0), int(K),
                     scale);
  });
}

// out = x · W'ᵀ (+ bias) through bf16 copies of W's rows, kDecodedChunkBytes at a time; a
// chunk's product lands in its columns of out (a strided copy when W takes several chunks).
void decoded_linear(CudaBackend& be, Tensor& out, const Tensor& x, const Tensor& w,
                    const Tensor& bias, int64_t chunk_bytes) {
  const int64_t T = x.rows(), N = w.dim(0), K = w.dim(1);
  const int64_t chunk = std::clamp<int64_t>(chunk_bytes / (2 * K), 1, N);
  const size_t elem = out.dtype == DType::F32 ? 4 : 2;
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t n = std::min(chunk, N - n0);
    Linear part;
    part.weight = be.alloc(DType::BF16, {n, K});
    if (bias.defined()) part.bias = bias.slice_rows(n0, n);
    decode_rows(be, part.weight, w.slice_rows(n0, n), nullptr, 1.f);
    if (n == N) return be.linear(out, x, part);
    Tensor y = be.alloc(out.dtype, {T, n});
    be.linear(y, x, part);
    cuda_check(cudaMemcpy2DAsync(static_cast<char*>(out.data) + size_t(n0) * elem, size_t(N) * elem,
                                 y.data, size_t(n) * elem, size_t(n) * elem, size_t(T),
                                 cudaMemcpyDeviceToDevice, be.stream()),
               "linear: cudaMemcpy2DAsync");
  }
}

// The weight checks both ops share: a 2-d block-type tensor on the device, rows whole blocks.
void check_block_weight(const Tensor& w, const char* op, const char* name) {
  cuda::check_on_device(w, op, name);
  const int elems = dtype_block(w.dtype).elems;
  TANDEM_CUDA_REQUIRE(dtype_is_block(w.dtype) && w.ndim() == 2 && w.dim(1) % elems == 0 &&
                          w.dim(1) < (int64_t(1) << 30) && w.dim(0) < (int64_t(1) << 31),
                      std::string(op) + ": " + name + " " + w.shape.str() + " of " +
                          std::string(dtype_name(w.dtype)) +
                          " must be 2-d with rows of whole blocks of " + std::to_string(elems));
}

}  // namespace

void block_linear(CudaBackend& be, Tensor& out, const Tensor& x, const Linear& l,
                  int64_t chunk_bytes) {
  const Tensor &w = l.weight, &bias = l.bias;
  const bool out_f32 = out.dtype == DType::F32;
  check_block_weight(w, "linear", "w");
  cuda::check_tensor(out, out_f32 ? DType::F32 : DType::BF16, "linear", "out");
  cuda::check_tensor(x, DType::BF16, "linear", "x");
  TANDEM_CUDA_REQUIRE(!(out_f32 && bias.defined()), "linear: an f32 output takes no bias");
  const int64_t T = x.rows(), K = w.dim(1), N = w.dim(0);
  TANDEM_CUDA_REQUIRE(x.cols() == K,
                      "linear: x " + x.shape.str() + " does not match w " + w.shape.str());
  TANDEM_CUDA_REQUIRE(out.rows() == T && out.cols() == N, "linear: out " + out.shape.str() +
                                                              " must be [" + std::to_string(T) +
                                                              ", " + std::to_string(N) + "]");
  TANDEM_CUDA_REQUIRE(out.data != x.data, "linear: out may not alias x");
  if (bias.defined()) {
    cuda::check_tensor(bias, DType::BF16, "linear", "bias");
    TANDEM_CUDA_REQUIRE(bias.numel() == N, "linear: bias " + bias.shape.str() + " must have " +
                                               std::to_string(N) + " elements");
  }
  if (T == 0 || N == 0) return;
  if (T <= kBlockGemvMaxRows && cuda::aligned16(x.data)) return gemv(be, out, x, w, bias);
  if (gguf_tiles() && block_tiles_fit(be, x, w)) return block_tiles_linear(be, out, x, w, bias);
  decoded_linear(be, out, x, w, bias, chunk_bytes);
}

void block_embedding(CudaBackend& be, Tensor& out, const Tensor& table, const Tensor& ids,
                     float scale) {
  check_block_weight(table, "embedding", "table");
  cuda::check_tensor(out, DType::BF16, "embedding", "out");
  cuda::check_tensor(ids, DType::I32, "embedding", "ids");
  const int64_t T = ids.numel(), D = table.dim(1);
  TANDEM_CUDA_REQUIRE(out.rows() == T && out.cols() == D, "embedding: out " + out.shape.str() +
                                                              " must be [" + std::to_string(T) +
                                                              ", " + std::to_string(D) + "]");
  TANDEM_CUDA_REQUIRE(cuda::aligned16(out.data), "embedding: out must be 16-byte aligned");
  decode_rows(be, out, table, ids.ptr<int32_t>(), scale);
}

}  // namespace tandem
