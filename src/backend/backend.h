// Backend: owns device memory and runs the ops a transformer forward needs.
// The CPU backend (cpu/) is the reference: f32 arithmetic, every op tested against a
// naive loop. The CUDA backend (cuda/, bf16) must compute the same functions; each of
// its ops has a comparison test against the CPU twin.
//
// Conventions for every op:
//   - tensors are contiguous, row-major, on this backend's device;
//   - activations are the backend's `act_dtype()` (f32 on the CPU); weights are in
//     `weight_dtype()` of the dtype the checkpoint stores them in;
//   - shapes are in the comments; "T" = tokens in the step, "B" = rows (sequences),
//     "D" = hidden size, "H" = heads, "Dh" = head dim, "E" = experts;
//   - outputs may not alias inputs unless the op says "in place".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/linear.h"
#include "backend/sampling.h"
#include "backend/step_tensors.h"
#include "core/tensor.h"

namespace tandem {

// How rotary position embeddings are applied to one layer type. Computed once from the
// config (model/rope.h); the op only rotates. Non-interleaved (HF "rotate_half").
struct RopeSpec {
  std::vector<float> inv_freq;  // [rotary_dim / 2]
  int rotary_dim = 0;           // leading dims of each head that rotate; the rest pass through
  float attention_factor = 1.f; // scales cos and sin (yarn / longrope "mscale")
  // rope_type "dynamic" (NTK): when a row's length L exceeds original_max_position, HF
  // recomputes inv_freq with base * ((factor * L / original) - (factor - 1))^(d / (d - 2)).
  float dynamic_factor = 0.f;   // 0 = not dynamic
  int original_max_position = 0;
  float base = 10000.f;
};

enum class Activation : uint8_t { SiLU, GeluTanh };

struct AttentionParams {
  float scale = 1.f;    // multiplies q·k
  float softcap = 0.f;  // >0: scores = softcap * tanh(scores / softcap)
  int window = 0;       // >0: query at position p sees keys at positions (p - window, p]
  // The soft tokens of one image see each other both ways (StepTensors::media_ends): a
  // query at p inside an image ending at e sees keys [lo, e - 1], [lo, p] being its causal
  // (windowed) range — one range per query still. The window keeps cutting the past, the
  // image's own tokens included, as transformers' masks do.
  bool media_bidirectional = false;
};

// Per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3), and of v (Gemma 3n/4, whose
// v_norm has no weight: ones); undefined tensors: none.
struct QkNorm {
  Tensor q, k;  // [Dh] each
  float eps = 1e-6f;
  float weight_offset = 0.f;
  Tensor v;     // [Dh] or undefined
};

// A sampling op in flight (Backend::sample_async). The picked ids stay on the device,
// where a later op may read them (feed_tokens), while they travel to the host.
struct PendingSample {
  int num_rows = 0;
  std::shared_ptr<void> state;  // the backend's own: results, their host copy, an event
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual DType act_dtype() const = 0;
  // The dtype this backend holds a weight in, given the dtype the checkpoint stores it in
  // (the weight loader asks). Every weight-taking op — linear (a Linear's weight and
  // bias), embedding, the norms, mul's b, moe_experts — takes the dtypes this returns as
  // well as act_dtype(). Default: the activation dtype.
  virtual DType weight_dtype(DType stored) const { return act_dtype(); }

  // --- memory ---
  // Uninitialized device tensor.
  virtual Tensor alloc(DType dtype, Shape shape) = 0;
  // Zero-filled device tensor.
  virtual Tensor zeros(DType dtype, Shape shape) = 0;
  // Copies a host tensor to the device, converting to `dtype`.
  virtual Tensor upload(const Tensor& host, DType dtype) = 0;
  // Copies a device tensor to a host f32 tensor (any source dtype).
  virtual Tensor to_host_f32(const Tensor& t) = 0;
  // Copies a host i32 array into an existing device tensor of >= n elements.
  virtual void write_i32(Tensor& dst, const int32_t* src, int64_t n) = 0;
  // Copies a host [rows, cols] i32 array into the first `cols` columns of the first
  // `rows` rows of a device tensor [R, C] (rows <= R, cols <= C); the rest is untouched.
  // The default serves host-memory backends.
  virtual void write_i32_rows(Tensor& dst, const int32_t* src, int64_t rows, int64_t cols);
  virtual void copy(Tensor& dst, const Tensor& src) = 0;
  // Splits x's columns into consecutive pieces: outs[i] gets the next outs[i].cols()
  // columns of every row (Σ cols == x.cols()). The default serves host-memory backends.
  //   x [T, C], outs[i] [T, C_i]
  virtual void split_columns(const Tensor& x, std::initializer_list<Tensor*> outs);
  // The inverse: out's columns are the pieces' side by side, in order (Σ cols == out.cols()).
  // The default serves host-memory backends.   out [T, C], parts[i] [T, C_i]
  virtual void concat_columns(Tensor& out, std::span<const Tensor> parts);
  virtual void synchronize() {}
  // Bytes this backend's device could still allocate (free RAM on the CPU, free GPU memory).
  virtual int64_t available_memory() const;

  // --- graphs (optional; the CUDA backend records decode steps as CUDA graphs) ---
  // Ops issued between capture_begin() and capture_end() are recorded instead of run;
  // replay() runs the recording again over the same device addresses. Inputs are
  // changed between replays by writing into the tensors the recorded ops read.
  virtual bool supports_graphs() const { return false; }
  virtual void capture_begin();
  virtual std::shared_ptr<void> capture_end();
  virtual void replay(const std::shared_ptr<void>& graph);

  // --- ops ---
  // out[t] = table[ids[t]] * scale.   out [T, D], table [V, D], ids [T] i32
  virtual void embedding(Tensor& out, const Tensor& table, const Tensor& ids, float scale) = 0;
  // out = x · Wᵀ (+ bias), W and bias from `l` (backend/linear.h).
  //   out [T, N], x [T, K], l.weight [N, K], l.bias [N] or undefined
  // out is act_dtype(), or f32 without a bias (logits, router scores: sums not rounded).
  virtual void linear(Tensor& out, const Tensor& x, const Linear& l) = 0;
  // LoRA after the base product (backend/linear.h): out[t] += (x[t] · A[s]ᵀ) · B[s]ᵀ for
  // s = rows.slots[t] > 0; rows of slot 0 are left as they are. A backend may read only
  // `slots` (the CPU groups them itself) or only order/num_active (CUDA: every adapter in
  // one launch). The default fails ("not implemented").
  //   out [T, N], x [T, K], lora.a [S, R, K], lora.b [S, N, R], rows: step_tensors.h
  virtual void lora_add(Tensor& out, const Tensor& x, const LinearLora& lora, const LoraRows& rows);
  // Per row: out = x / rms(x) * (w + weight_offset).   x, out [R, C], w [C]
  // weight_offset is 1 for Gemma's (1 + w) norms, 0 otherwise. In place allowed.
  virtual void rms_norm(Tensor& out, const Tensor& x, const Tensor& w, float eps,
                        float weight_offset) = 0;
  // residual += x; out = rms_norm(residual) (the pre-norm decoder's step between blocks).
  //   residual (in place), x, out [R, C], w [C]. out may alias x, not residual.
  virtual void add_rms_norm(Tensor& out, Tensor& residual, const Tensor& x, const Tensor& w,
                            float eps, float weight_offset) = 0;
  // out = a + b (same shape). In place allowed.
  virtual void add(Tensor& out, const Tensor& a, const Tensor& b) = 0;
  // x *= s, in place.
  virtual void scale(Tensor& x, float s) = 0;
  // x = cap * tanh(x / cap), in place.
  virtual void softcap(Tensor& x, float cap) = 0;
  // Rotates each head in place.   x [T, H, Dh], positions [T] i32
  virtual void rope(Tensor& x, const StepTensors& step, const RopeSpec& spec) = 0;
  // out = act(gate) * up, where gate_up = [gate | up].   out [T, F], gate_up [T, 2F]
  virtual void gated_act(Tensor& out, const Tensor& gate_up, Activation act) = 0;
  // FP8 inputs made where they are written (optional; linear.h, Fp8Input): rms_norm,
  // add_rms_norm and gated_act that also set `q` to out's e4m3 copy where the backend fuses
  // it into the op (CUDA), and the linear that reads such a copy instead of quantizing x.
  // The defaults run the plain ops and leave q undefined; linear_fp8_input with an undefined
  // q (or a Linear that does not take one) is linear.
  virtual void rms_norm_fp8(Tensor& out, Fp8Input& q, const Tensor& x, const Tensor& w, float eps,
                            float weight_offset);
  virtual void add_rms_norm_fp8(Tensor& out, Fp8Input& q, Tensor& residual, const Tensor& x,
                                const Tensor& w, float eps, float weight_offset);
  virtual void gated_act_fp8(Tensor& out, Fp8Input& q, const Tensor& gate_up, Activation act);
  virtual void linear_fp8_input(Tensor& out, const Tensor& x, const Fp8Input& q, const Linear& l);
  // Writes the step's new K and V into their slots, step.kv(cache).slot_map.
  //   k, v [T, Hkv, Dh]
  virtual void write_kv(PagedKv& cache, const Tensor& k, const Tensor& v,
                        const StepTensors& step) = 0;
  // The attention block's step from the fused projection to the cache: q, k, v are the
  // column blocks of qkv; q, k and v get the optional per-head RMSNorm, then q and k RoPE;
  // k and v go to their slots (write_kv), q to `q`. A qkv of (Hq + Hkv)·Dh columns has no
  // v block: V is the key projection before its norm and RoPE (Gemma 4's
  // attention_k_eq_v). The default composes split_columns, rms_norm, rope and write_kv;
  // the CUDA backend does the common case (q/k norms at most, separate v) in one kernel (a
  // decode step runs this once per layer, so its launches count).
  //   q [T, Hq, Dh] (out), qkv [T, (Hq + 2·Hkv)·Dh] or [T, (Hq + Hkv)·Dh],
  //   cache [NB, BS, Hkv, Dh]
  virtual void qkv_to_cache(Tensor& q, const Tensor& qkv, PagedKv& cache,
                            const StepTensors& step, const RopeSpec& rope_spec,
                            const QkNorm& norm);
  // Causal attention of each new token over its row's cached keys (its own included),
  // read through step.kv(cache).block_table; GQA: query head h reads kv head
  // h / (Hq / Hkv). With params.media_bidirectional and step.media_ends defined, a token
  // of an image also sees the rest of its image (AttentionParams).   out, q [T, Hq, Dh]
  virtual void attention(Tensor& out, const Tensor& q, const PagedKv& cache,
                         const StepTensors& step, const AttentionParams& params) = 0;
  // out[s] = x[index[s]].   out [S, D], x [T, D], index [S] i32
  virtual void gather_rows(Tensor& out, const Tensor& x, const Tensor& index) = 0;
  // Sums of runs of consecutive rows, in f32: out[e] = Σ x[q] over q in [starts[e],
  // starts[e+1]) (an empty run sums to zeros). Embedding rows pool their final hidden
  // states with it (model/pooled_hidden.h). Not pure: a backend without it fails.
  //   out [E, D] f32, x [Q, D], starts [E+1] i32 (non-decreasing, from 0 to Q)
  virtual void segment_sum(Tensor& out, const Tensor& x, const Tensor& starts);
  // Mixture-of-experts routing: softmax over experts, keep the top k, optionally
  // renormalize the kept weights to sum to 1.
  //   weights [T, k] f32, ids [T, k] i32, logits [T, E]
  virtual void topk_route(Tensor& weights, Tensor& ids, const Tensor& logits, int k,
                          bool renormalize) = 0;
  // out[t] = Σ_j weights[t, j] · down_e(act(gate_e x) * up_e x), e = ids[t, j]; gate_up
  // and down are stacked expert projections (linear.h), FP8 ones only where
  // fp8_experts().   out, x [T, D], gate_up [E, 2F, D], down [E, D, F]
  virtual void moe_experts(Tensor& out, const Tensor& x, const Tensor& weights, const Tensor& ids,
                           const Linear& gate_up, const Linear& down, Activation act) = 0;
  // Whether moe_experts takes FP8 experts (the loader refuses an FP8 expert checkpoint
  // where it does not).
  virtual bool fp8_experts() const { return false; }

  // --- sampling (backend/sampling.h) ---
  // Picks one token per row of `logits` under that row's parameters; only the results
  // come back to the host. `logits` may be modified (penalties, temperature).
  // `draft_logits`: the draft model's logits that rows' draft checks read (step 5).
  //   logits [S, V] (act dtype or f32), rows.size() == S, out.size() == S,
  //   draft_logits [Q, V] f32 or null
  virtual void sample(Tensor& logits, std::span<const SampleRow> rows, std::span<SampledToken> out,
                      const Tensor* draft_logits = nullptr) = 0;
  // sample() in two halves, so the host can plan and issue the next step while the device
  // samples this one: sample_async issues the op and returns; sample_wait blocks until
  // the results are on the host. The defaults run sample() inside sample_async (host
  // backends have nothing to overlap).
  virtual PendingSample sample_async(Tensor& logits, std::span<const SampleRow> rows,
                                     const Tensor* draft_logits = nullptr);
  virtual void sample_wait(PendingSample& pending, std::span<SampledToken> out);
  // tokens[dst[i]] = the token `from` picked for its row src[i]: a step's input ids that
  // the previous step has not returned to the host yet, written on the device in order
  // after `from` and before the ops issued next.   tokens [T] i32
  virtual void feed_tokens(Tensor& tokens, std::span<const int32_t> dst,
                           std::span<const int32_t> src, const PendingSample& from);
  // The ids `from` picked, on this device, written in order after it: what tensor-parallel
  // rank 0 broadcasts to the other ranks (Communicator::broadcast_ids).   [S] i32
  virtual Tensor sampled_ids(const PendingSample& from);
  // A sampling op that picked `ids` (received from rank 0's, on this device): feed_tokens
  // reads it like the op itself, in stream order. Never waited for: the host has the ids
  // from rank 0.   ids [S] i32
  virtual PendingSample picked_ids(Tensor ids);

  // --- elementwise and stream-mixing ops (Gemma 3n and 4 use them) ---
  // Not pure: a backend without them fails with "op '...' is not implemented".
  // out = a - b (same number of elements). In place allowed.
  virtual void sub(Tensor& out, const Tensor& a, const Tensor& b);
  // out = a * b, where b has a's size or is one row [C] broadcast over a's rows.
  // In place allowed.   out, a [R, C], b [R, C] or [C]
  virtual void mul(Tensor& out, const Tensor& a, const Tensor& b);
  // out = act(a) * b: a plain (ungated) activation times a second tensor.
  //   out, a, b [R, C]
  virtual void act_mul(Tensor& out, const Tensor& a, const Tensor& b, Activation act);
  // Activation sparsity (HF Gemma 3n `_gaussian_topk`), per row, in place:
  // x = relu(x - (mean(x) + std(x) · std_multiplier)), std the population one (÷C).
  //   x [R, C]
  virtual void gaussian_topk(Tensor& x, float std_multiplier);
  // Per row, in place: x = x · rms(ref) / sqrt(max(mean(x²), min_mean_square)),
  // rms(ref) = sqrt(mean(ref²)).   x, ref [R, C]
  virtual void match_rms(Tensor& x, const Tensor& ref, float min_mean_square);
  // Per-token mix of S streams into M, accumulated into out:
  //   out[m, t] += Σ_s coefs[t, m·S + s] · x[s, t]
  //   out [M, T, C], x [S, T, C], coefs [T, M·S]; out may not alias x.
  virtual void mix_streams(Tensor& out, const Tensor& x, const Tensor& coefs);
  // Swaps the two leading dims: out[b, a] = x[a, b].   out [B, A, C], x [A, B, C]
  virtual void swap_leading_dims(Tensor& out, const Tensor& x);

  // --- vision encoder ops (model/vision; not pure: the default fails like the above) ---
  // Per row: out = (x − mean(x)) / sqrt(var(x) + eps) · w + b, var the population one
  // (torch's LayerNorm: SigLIP).   out, x [R, C], w, b [C]. In place allowed.
  virtual void layer_norm(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                          float eps);
  // x = min(max(x, lo), hi), in place (torch.clamp: Gemma 4's clipped linears).
  virtual void clamp(Tensor& x, float lo, float hi);
};

// The CPU backend, on the process-wide thread pool.
std::unique_ptr<Backend> make_cpu_backend();

// Pieces of the CUDA fast path that can be turned off (the environment switches of
// cli/env_switches.h set them). Each backend holds its own, except pdl, which every kernel
// launch reads process-wide: the last backend made (or set_options) sets it.
struct CudaOptions {
  bool gemv = true;  // few-row linears stream their weights (cuda_gemv*.cu); off: the GEMMs
  bool pdl = true;   // kernels overlap their prologue with the previous kernel's tail
  bool sm90_prefill = true;        // prefill attention on the wgmma kernel where it fits; off:
                                   // the mma.sync kernel everywhere (cuda_attention_prefill.h)
  bool fp8_fast_accum = true;      // many-row FP8 GEMMs chain all of K in the tensor cores'
                                   // accumulator; off: f32 every 128 columns (cuda_linear_fp8.h)
  bool fp8_moe_tc = true;          // FP8 MoE experts' GEMMs on the e4m3 tensor cores (mma.sync;
                                   // 2.2-2.5x the reference on an H200); off: the bf16-widening
                                   // reference kernel (cuda_moe_gemm.h), the fallback
  bool verify_decode_kernel = true;  // attention of steps whose rows have 2..8 tokens
                                     // (speculative verify steps) on the decode kernel,
                                     // every token a query (measured faster on an H100:
                                     // cuda_attention.cu); off: the prefill kernel (tests)
};

// The CUDA backend on GPU `device`. Throws tandem::Error when the build has no CUDA
// support or the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(int device = 0, const CudaOptions& options = {});
// Usable CUDA GPUs (0 when built without CUDA, without a driver, or without a GPU).
int cuda_device_count();

}  // namespace tandem
