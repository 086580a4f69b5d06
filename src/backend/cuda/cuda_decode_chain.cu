// The fused decode chain (issue 45; Backend::rms_norm_linear, linear_add,
// gated_act_linear_add): for steps of 1–8 rows with FP8 projections, each op is one FP8
// weight stream (cuda_gemv_fp8.cu) that makes its own input in its prologue (the norm or
// the gated activation, then the e4m3 quantization: cuda_stream_input.cuh) and adds its
// product into the residual stream in its epilogue. A decode layer then runs six kernels
// (qkv with the attention norm, qkv_to_cache, attention, o + residual, gate_up with the
// MLP norm, down with the activation + residual) instead of nine: on the H200's 8B shape
// the two norms and the activation took 10 of a layer's 90 µs in the chain
// (bench/RESULTS.md, 2026-12-02, fifth session), each a kernel on the critical path.
// Where the stream does not take a call (bf16 weights, more rows, shapes it declines, the
// switch off: CudaOptions::fp8_decode_fusion), the op runs the plain ops it composes.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemv_fp8.h"
#include "backend/cuda/cuda_linear_fp8.cuh"

namespace tandem {

namespace {

// The stream takes `l` for input rows [T, K] made from `src` (16-byte aligned, as the
// prologue loads it), with x's checked call in *c.
bool streams(const CudaBackend& be, const cuda::Fp8Call& c, const Tensor& src) {
  return be.fuses_decode_chain(c.T) && !c.out_f32 && cuda::aligned16(src.data) &&
         cuda::takes_weight_stream(c, be.fp8_gemm_path(), be.options().gemv);
}

}  // namespace

bool CudaBackend::fuses_decode_chain(int64_t rows) const {
  return options_.fp8_decode_fusion && options_.gemv && rows >= 1 && rows <= kFp8GemvMaxRows;
}

// h = rms_norm(x, w); out = h · lᵀ, x normed in the stream's prologue (h written by its
// first CTA).   x, h [T, D], w [D], out [T, N]
void CudaBackend::rms_norm_linear(Tensor& out, Tensor& h, const Tensor& x, const Tensor& w,
                                  float eps, float weight_offset, const Linear& l) {
  if (!l.quant || !fuses_decode_chain(x.rows()) || w.dtype != DType::BF16)
    return Backend::rms_norm_linear(out, h, x, w, eps, weight_offset, l);
  cuda::check_tensor(x, DType::BF16, "rms_norm_linear", "x");
  cuda::check_tensor(h, DType::BF16, "rms_norm_linear", "h");
  cuda::check_tensor(w, DType::BF16, "rms_norm_linear", "w");
  TANDEM_CUDA_REQUIRE(h.shape == x.shape && w.numel() == x.cols(),
                      "rms_norm_linear: h " + h.shape.str() + " and w " + w.shape.str() +
                          " must match x " + x.shape.str());
  TANDEM_CUDA_REQUIRE(h.data != x.data, "rms_norm_linear: h may not alias x");
  const cuda::Fp8Call c = cuda::check_fp8_call(out, h, l);
  if (c.T == 0 || c.N == 0 || !streams(*this, c, x) || !cuda::aligned16(w.data))
    return Backend::rms_norm_linear(out, h, x, w, eps, weight_offset, l);
  Fp8GemvArgs a{&h, c.static_scale, &l.weight, c.ws, &l.bias};
  a.fusion.input = Fp8GemvFusion::Input::Norm;
  a.fusion.src = &x;
  a.fusion.norm_w = &w;
  a.fusion.eps = eps;
  a.fusion.offset = weight_offset;
  a.fusion.h = &h;
  launch_fp8_gemv(*this, out, a);
}

// residual += x · lᵀ, the product added in the stream's epilogue.   x [T, K], residual [T, N]
void CudaBackend::linear_add(Tensor& residual, const Tensor& x, const Linear& l) {
  if (!l.quant || !fuses_decode_chain(x.rows())) return Backend::linear_add(residual, x, l);
  const cuda::Fp8Call c = cuda::check_fp8_call(residual, x, l);
  if (c.T == 0 || c.N == 0 || !streams(*this, c, x)) return Backend::linear_add(residual, x, l);
  Fp8GemvArgs a{&x, c.static_scale, &l.weight, c.ws, &l.bias};
  a.fusion.add = true;
  launch_fp8_gemv(*this, residual, a);
}

// a = act(gate) · up, made in the stream's prologue (and written by its first CTA);
// residual += a · lᵀ in its epilogue.   gate_up [T, 2F], a [T, F], residual [T, N]
void CudaBackend::gated_act_linear_add(Tensor& residual, Tensor& a, const Tensor& gate_up,
                                       Activation act, const Linear& l) {
  if (!l.quant || !fuses_decode_chain(gate_up.rows()))
    return Backend::gated_act_linear_add(residual, a, gate_up, act, l);
  cuda::check_tensor(gate_up, DType::BF16, "gated_act_linear_add", "gate_up");
  cuda::check_tensor(a, DType::BF16, "gated_act_linear_add", "a");
  TANDEM_CUDA_REQUIRE(gate_up.rows() == a.rows() && gate_up.cols() == 2 * a.cols(),
                      "gated_act_linear_add: gate_up " + gate_up.shape.str() +
                          " must be [T, 2F] for a " + a.shape.str());
  const cuda::Fp8Call c = cuda::check_fp8_call(residual, a, l);
  if (c.T == 0 || c.N == 0 || !streams(*this, c, gate_up))
    return Backend::gated_act_linear_add(residual, a, gate_up, act, l);
  Fp8GemvArgs args{&a, c.static_scale, &l.weight, c.ws, &l.bias};
  args.fusion.input = Fp8GemvFusion::Input::GatedAct;
  args.fusion.src = &gate_up;
  args.fusion.act = act;
  args.fusion.h = &a;
  args.fusion.add = true;
  launch_fp8_gemv(*this, residual, args);
}

}  // namespace tandem
