// CpuBackend: the reference implementation of every Backend op.
// f32 arithmetic throughout. Activations are f32; weights stay in the 16-bit dtype they
// are stored in (bf16, f16; weight_dtype) and are widened to f32 as the kernels read
// them, so the math is f32 over the stored values at half the bytes. Storage keeps the
// dtype asked for (an f8_e4m3 KV cache included, which write_kv and attention read and
// write). "Device" memory is 64-byte aligned host memory; the weights and the KV cache
// are on 2 MiB pages where the system gives them, and large activations are reused from
// step to step rather than faulted in afresh (cpu_host_memory.h).
//
// Determinism: every output element is computed by exactly one thread with a fixed
// summation order, so results do not depend on the thread count, and a row's results do
// not depend on the other rows of the step (the GEMMs included: cpu_gemm.h).
//
// The ops live in one file per family: cpu_memory.cpp, cpu_linear.cpp (linear, embedding,
// gather_rows; the GEMM kernels: cpu_gemm.h), cpu_norm.cpp (rms_norm, add_rms_norm, add,
// scale, softcap), cpu_activation.cpp (gated_act), cpu_rope.cpp, cpu_attention.cpp
// (write_kv, attention; the cache's element types: cpu_kv_cache.h; the tile kernels:
// cpu_attention_kernels.h), cpu_moe.cpp
// (topk_route, moe_experts), cpu_sample.cpp (sample), cpu_gemma3n_ops.cpp,
// cpu_vision_ops.cpp (layer_norm, clamp).
#pragma once

#include "backend/backend.h"
#include "backend/cpu/cpu_block_gemm.h"
#include "backend/cpu/cpu_block_panel_store.h"
#include "backend/cpu/cpu_host_memory.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace tandem {

class CpuBackend final : public Backend {
 public:
  // `pool` runs the data-parallel loops; nullptr = ThreadPool::global(). `isa` picks the
  // kernels (GEMM, attention); a cpu without it fails here.
  explicit CpuBackend(ThreadPool* pool = nullptr, CpuIsa isa = cpu_isa());

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::CPU; }
  DType act_dtype() const override { return DType::F32; }
  // bf16, f16, e4m3 and ggml's block types stay as stored; anything else becomes f32.
  DType weight_dtype(DType stored) const override;

  // --- memory (cpu_memory.cpp) ---
  Tensor alloc(DType dtype, Shape shape) override;
  Tensor zeros(DType dtype, Shape shape) override;
  Tensor upload(const Tensor& host, DType dtype) override;
  Tensor to_host_f32(const Tensor& t) override;
  void write_i32(Tensor& dst, const int32_t* src, int64_t n) override;
  void copy(Tensor& dst, const Tensor& src) override;

  // --- ops ---
  void embedding(Tensor& out, const Tensor& table, const Tensor& ids, float scale) override;
  void linear(Tensor& out, const Tensor& x, const Linear& l) override;
  void lora_add(Tensor& out, const Tensor& x, const LinearLora& lora,
                const LoraRows& rows) override;
  void rms_norm(Tensor& out, const Tensor& x, const Tensor& w, float eps,
                float weight_offset) override;
  void add_rms_norm(Tensor& out, Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    float weight_offset) override;
  void add(Tensor& out, const Tensor& a, const Tensor& b) override;
  void scale(Tensor& x, float s) override;
  void softcap(Tensor& x, float cap) override;
  void rope(Tensor& x, const StepTensors& step, const RopeSpec& spec) override;
  void gated_act(Tensor& out, const Tensor& gate_up, Activation act) override;
  void write_kv(PagedKv& cache, const Tensor& k, const Tensor& v, const StepTensors& step) override;
  void attention(Tensor& out, const Tensor& q, const PagedKv& cache, const StepTensors& step,
                 const AttentionParams& params) override;
  void gather_rows(Tensor& out, const Tensor& x, const Tensor& index) override;
  void segment_sum(Tensor& out, const Tensor& x, const Tensor& starts) override;  // cpu_pool.cpp
  void topk_route(Tensor& weights, Tensor& ids, const Tensor& logits, int k,
                  bool renormalize) override;
  void moe_experts(Tensor& out, const Tensor& x, const Tensor& weights, const Tensor& ids,
                   const Linear& gate_up, const Linear& down, Activation act) override;
  // On by default; off, the backend stands for one without FP8 experts, so tests can check
  // what the loader does there (online quantization keeps the experts 16-bit).
  bool fp8_experts() const override { return fp8_experts_; }
  void set_fp8_experts(bool on) { fp8_experts_ = on; }
  void sample(Tensor& logits, std::span<const SampleRow> rows, std::span<SampledToken> out,
              const Tensor* draft_logits = nullptr) override;

  // --- elementwise and stream-mixing ops (cpu_gemma3n_ops.cpp) ---
  void sub(Tensor& out, const Tensor& a, const Tensor& b) override;
  void mul(Tensor& out, const Tensor& a, const Tensor& b) override;
  void act_mul(Tensor& out, const Tensor& a, const Tensor& b, Activation act) override;
  void gaussian_topk(Tensor& x, float std_multiplier) override;
  void match_rms(Tensor& x, const Tensor& ref, float min_mean_square) override;
  void mix_streams(Tensor& out, const Tensor& x, const Tensor& coefs) override;
  void swap_leading_dims(Tensor& out, const Tensor& x) override;

  // --- vision encoder ops (cpu_vision_ops.cpp) ---
  void layer_norm(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                  float eps) override;
  void clamp(Tensor& x, float lo, float hi) override;

  ThreadPool& pool() const { return *pool_; }
  CpuIsa isa() const { return isa_; }
  // The FP8 linears round their inputs to bf16 before quantizing them, as a backend with
  // bf16 activations (CUDA) hands them over; off by default. What that rounding alone
  // costs is the yardstick of the CUDA FP8 gate (tests/golden/cuda_fp8_gate_test.cpp).
  void set_fp8_inputs_bf16(bool on) { fp8_inputs_bf16_ = on; }
  // How linears and experts with ggml block-type weights compute (cpu_block_gemm.h). Under
  // Int8, block weights uploaded get panels (cpu_block_panels.h) in place of their blocks
  // (cpu_block_panel_store.h); set it before the weights are uploaded (weights uploaded under
  // Exact run Int8 without panels; weights held as panels run Exact over their decoded values).
  void set_block_arithmetic(cpu::BlockArithmetic a) { block_arithmetic_ = a; }
  cpu::BlockArithmetic block_arithmetic() const { return block_arithmetic_; }
  // Bytes of panels held for the block weights.
  size_t block_panel_bytes() const { return panels_.bytes(); }

 private:
  // A tensor on huge pages when it is big enough to be streamed (weights through the
  // arena, the KV cache in a mapping of its own: cpu_host_memory.h), else on the heap;
  // zero-filled either way.
  Tensor host_tensor(DType dtype, Shape shape, bool weight);

  // A 512-token prefill step of a ~100M model keeps a few tens of MB of activations live.
  static constexpr size_t kMaxCachedActivations = size_t(256) << 20;
  // linear() of an FP8 Linear (cpu_linear_fp8.cpp).
  void linear_fp8(Tensor& out, const Tensor& x, const Linear& l);
  // out [M, N] = x [M, K] · w [N, K]ᵀ for a block-type w, from its panels where it is held as
  // panels (cpu_linear.cpp).
  void block_product(float* out, const float* x, const Tensor& w, int64_t M, int64_t N, int64_t K);

  ThreadPool* pool_;
  CpuIsa isa_;
  bool fp8_inputs_bf16_ = false;
  bool fp8_experts_ = true;
  cpu::BlockArithmetic block_arithmetic_ = cpu::kDefaultBlockArithmetic;
  cpu::HugePageArena weights_;
  cpu::BlockPanelStore panels_;   // the block weights uploaded under Int8
  cpu::BufferCache activations_;  // alloc()'s tensors of 64 KiB and more
};

}  // namespace tandem
