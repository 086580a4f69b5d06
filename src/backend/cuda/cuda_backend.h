// CudaBackend: the Backend ops on one NVIDIA GPU (sm_90), bf16 activations and weights,
// f32 accumulation. Every op computes the function its CPU twin (cpu/) computes and has
// a comparison test in tests/unit/backend_cuda/.
//
// Execution: everything runs in order on one stream (`stream()`); no op synchronizes the
// host except the ones that return host data (to_host_f32, sample, sample_wait). Memory comes from a
// caching allocator (cuda_memory.cpp) that never returns blocks to the driver, so
// steady-state steps allocate nothing from CUDA and addresses captured in CUDA graphs
// stay valid (stream order makes reuse between ops safe).
//
// The ops live one family per file, kernels first and launchers last (cuda_<family>.cu);
// each launcher validates with cuda_check.h, the kernels share cuda_device.cuh and launch
// through cuda_pdl.cuh (programmatic dependent launch).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_linear_fp8.h"

namespace tandem {

class CudaAllocator;
struct SamplePool;  // cuda_sample_op.cu: pinned result buffers reused across steps

// Throws tandem::Error. nvcc cannot compile fmt (core/error.h), so .cu files use these.
[[noreturn]] void cuda_fail(const std::string& message);
// Throws tandem::Error naming the call and CUDA's message.
void cuda_check(cudaError_t err, const char* what);
void cublas_check(cublasStatus_t status, const char* what);
// Argument checks in .cu files: cuda_require(x.dtype == DType::BF16, "rms_norm: x must be bf16").
inline void cuda_require(bool ok, const char* message) {
  if (!ok) cuda_fail(message);
}
// After a kernel launch: reports launch errors with the kernel's name.
#define TANDEM_CUDA_LAUNCHED(name) ::tandem::cuda_check(cudaGetLastError(), name)

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device, const CudaOptions& options = {});
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::CUDA; }
  DType act_dtype() const override { return DType::BF16; }

  // --- memory (cuda_backend.cpp) ---
  Tensor alloc(DType dtype, Shape shape) override;
  Tensor zeros(DType dtype, Shape shape) override;
  Tensor upload(const Tensor& host, DType dtype) override;
  Tensor to_host_f32(const Tensor& t) override;
  void write_i32(Tensor& dst, const int32_t* src, int64_t n) override;
  void write_i32_rows(Tensor& dst, const int32_t* src, int64_t rows, int64_t cols) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void split_columns(const Tensor& x, std::initializer_list<Tensor*> outs) override;
  void concat_columns(Tensor& out, std::span<const Tensor> parts) override;
  void synchronize() override;
  int64_t available_memory() const override { return free_device_bytes(); }
  // --- graphs (cuda_graph.cpp) ---
  bool supports_graphs() const override { return true; }
  void capture_begin() override;
  std::shared_ptr<void> capture_end() override;
  void replay(const std::shared_ptr<void>& graph) override;

  // --- ops ---
  void embedding(Tensor& out, const Tensor& table, const Tensor& ids, float scale) override;
  void linear(Tensor& out, const Tensor& x, const Linear& l) override;
  void lora_add(Tensor& out, const Tensor& x, const LinearLora& lora,
                const LoraRows& rows) override;  // cuda_lora.cu
  // FP8 weights: the e4m3 weight as stored, scales in f32 (cuda_linear_fp8.cu). ggml block
  // types: as stored, for linear, embedding and moe_experts (cuda_block_linear.cu).
  DType weight_dtype(DType stored) const override {
    return stored == DType::F8E4M3 || dtype_is_block(stored) ? stored : DType::BF16;
  }
  void rms_norm(Tensor& out, const Tensor& x, const Tensor& w, float eps,
                float weight_offset) override;
  void add_rms_norm(Tensor& out, Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    float weight_offset) override;
  void add(Tensor& out, const Tensor& a, const Tensor& b) override;
  void scale(Tensor& x, float s) override;
  void softcap(Tensor& x, float cap) override;
  void rope(Tensor& x, const StepTensors& step, const RopeSpec& spec) override;
  void gated_act(Tensor& out, const Tensor& gate_up, Activation act) override;
  // The FP8 linears' input quantization fused into the op that writes their input
  // (cuda_norm.cu), read by linear_fp8_input (cuda_linear_fp8.cu).
  void rms_norm_fp8(Tensor& out, Fp8Input& q, const Tensor& x, const Tensor& w, float eps,
                    float weight_offset) override;
  void add_rms_norm_fp8(Tensor& out, Fp8Input& q, Tensor& residual, const Tensor& x,
                        const Tensor& w, float eps, float weight_offset) override;
  void gated_act_fp8(Tensor& out, Fp8Input& q, const Tensor& gate_up, Activation act) override;
  void linear_fp8_input(Tensor& out, const Tensor& x, const Fp8Input& q, const Linear& l) override;
  void write_kv(PagedKv& cache, const Tensor& k, const Tensor& v, const StepTensors& step) override;
  void qkv_to_cache(Tensor& q, const Tensor& qkv, PagedKv& cache, const StepTensors& step,
                    const RopeSpec& rope_spec, const QkNorm& norm) override;  // cuda_rope.cu
  void attention(Tensor& out, const Tensor& q, const PagedKv& cache, const StepTensors& step,
                 const AttentionParams& params) override;
  void gather_rows(Tensor& out, const Tensor& x, const Tensor& index) override;
  void segment_sum(Tensor& out, const Tensor& x, const Tensor& starts) override;  // cuda_pool.cu
  void topk_route(Tensor& weights, Tensor& ids, const Tensor& logits, int k,
                  bool renormalize) override;
  // bf16, FP8 (e4m3) or ggml block-type experts (cuda_moe.cu).
  void moe_experts(Tensor& out, const Tensor& x, const Tensor& weights, const Tensor& ids,
                   const Linear& gate_up, const Linear& down, Activation act) override;
  bool fp8_experts() const override { return true; }
  void sample(Tensor& logits, std::span<const SampleRow> rows, std::span<SampledToken> out,
              const Tensor* draft_logits = nullptr) override;
  PendingSample sample_async(Tensor& logits, std::span<const SampleRow> rows,
                             const Tensor* draft_logits = nullptr) override;
  void sample_wait(PendingSample& pending, std::span<SampledToken> out) override;
  void feed_tokens(Tensor& tokens, std::span<const int32_t> dst, std::span<const int32_t> src,
                   const PendingSample& from) override;
  Tensor sampled_ids(const PendingSample& from) override;
  PendingSample picked_ids(Tensor ids) override;

  // --- elementwise and stream-mixing ops (cuda_gemma_ops.cu) ---
  void sub(Tensor& out, const Tensor& a, const Tensor& b) override;
  void mul(Tensor& out, const Tensor& a, const Tensor& b) override;
  void act_mul(Tensor& out, const Tensor& a, const Tensor& b, Activation act) override;
  void gaussian_topk(Tensor& x, float std_multiplier) override;
  void match_rms(Tensor& x, const Tensor& ref, float min_mean_square) override;
  void mix_streams(Tensor& out, const Tensor& x, const Tensor& coefs) override;
  void swap_leading_dims(Tensor& out, const Tensor& x) override;

  // --- vision encoder ops (cuda_vision_ops.cu) ---
  void layer_norm(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                  float eps) override;
  void clamp(Tensor& x, float lo, float hi) override;

  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublas_lt() const { return cublas_lt_; }
  int device_index() const { return device_; }
  const cudaDeviceProp& props() const { return props_; }
  // The fast-path switches (backend.h); set_options is for tests and benches that compare
  // settings in one process.
  const CudaOptions& options() const { return options_; }
  void set_options(const CudaOptions& options);
  // Forces the FP8 linears onto one path (cuda_linear_fp8.h), for tests and benches;
  // Auto (the default) is the rule.
  void set_fp8_gemm_path(Fp8GemmPath path) { fp8_path_ = path; }
  Fp8GemmPath fp8_gemm_path() const { return fp8_path_; }
  // Bytes the caching allocator holds from the driver, and the GPU's free memory.
  int64_t reserved_bytes() const;
  int64_t free_device_bytes() const;
  // The FP8 wgmma GEMM's arrival counters for tiles cut over several CTAs (2 ints per CTA
  // of a launch, kFp8WgmmaMaxCutCtas CTAs), zero between launches like split_counters_;
  // created on first use, outside graph capture (cuda_gemm_fp8_sm90.cu).
  int* fp8_gemm_counters();

 private:
  // linear() of an FP8 Linear (cuda_linear_fp8.cu); xq: x's e4m3 copy, or null (quantized
  // here).
  void linear_fp8(Tensor& out, const Tensor& x, const Linear& l, const Fp8Input* xq = nullptr);
  // cuda_norm.cu: the ops behind rms_norm / add_rms_norm / gated_act and their _fp8 forms
  // (q null: no e4m3 copy), and the copy's buffers (undefined when fusion is off).
  void norm(Tensor& out, const Tensor& x, const Tensor& w, float eps, float weight_offset,
            Fp8Input* q);
  void add_norm(Tensor& out, Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                float weight_offset, Fp8Input* q);
  void act(Tensor& out, const Tensor& gate_up, Activation act, Fp8Input* q);
  Fp8Input alloc_fp8_input(int64_t R, int64_t C);
  int device_;
  CudaOptions options_;
  Fp8GemmPath fp8_path_ = Fp8GemmPath::Auto;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
  std::shared_ptr<CudaAllocator> allocator_;
  std::shared_ptr<SamplePool> sample_pool_;
  // cuda_attention.cu: the decode kernel's split-merge arrival counters, zero between
  // launches. Created on first use.
  std::shared_ptr<int> split_counters_;
  int* split_counters();
  std::shared_ptr<int> fp8_gemm_counters_;
  // `count` zeroed ints in `slot`, allocated on first use for kernels whose CTAs count
  // arrivals and leave them at zero (persistent state, so its own cudaMalloc: a
  // caching-allocator block may be a captured graph's temporary, which a replay would
  // overwrite). Outside graph capture only (a memset inside a capture would be a graph node
  // and eager launches before the first replay would see garbage): the decode graphs run
  // every captured step eagerly first. `what` names the caller in errors.
  int* zeroed_counters(std::shared_ptr<int>& slot, int64_t count, const char* what);
};

}  // namespace tandem
