// Backend: owns device memory and runs the ops a transformer forward needs.
// The CPU backend (cpu/) is the reference: f32 arithmetic, every op tested against a
// naive loop. The CUDA backend (cuda/, bf16) must compute the same functions; each of
// its ops has a comparison test against the CPU twin.
//
// Conventions for every op:
//   - tensors are contiguous, row-major, on this backend's device;
//   - activations are the backend's `act_dtype()` (f32 on the CPU);
//   - shapes are in the comments; "T" = tokens in the step, "B" = rows (sequences),
//     "D" = hidden size, "H" = heads, "Dh" = head dim, "E" = experts;
//   - outputs may not alias inputs unless the op says "in place".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

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
};

// The step's batch layout on the device: the StepPlan's arrays, uploaded once per step.
struct StepTensors {
  Tensor tokens;        // [T] i32
  Tensor positions;     // [T] i32: position of each token in its sequence
  Tensor slot_map;      // [T] i32: block * block_size + offset where its K/V is written
  Tensor seq_starts;    // [B+1] i32: row b owns tokens [seq_starts[b], seq_starts[b+1])
  Tensor context_lens;  // [B] i32: tokens of row b in the cache after this step
  Tensor block_table;   // [B, max_blocks] i32
  Tensor sample_index;  // [S] i32: index (into T) of the token whose logits are sampled
  int num_tokens = 0;
  int num_rows = 0;
  int max_blocks = 0;
  int max_context_len = 0;
  int block_size = 16;
};

// K and V storage of one layer: [num_blocks, block_size, kv_heads, head_dim] each.
struct PagedKv {
  Tensor k;
  Tensor v;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual DType act_dtype() const = 0;

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
  virtual void copy(Tensor& dst, const Tensor& src) = 0;
  // Splits x's columns into consecutive pieces: outs[i] gets the next outs[i].cols()
  // columns of every row (Σ cols == x.cols()). The default serves host-memory backends.
  //   x [T, C], outs[i] [T, C_i]
  virtual void split_columns(const Tensor& x, std::initializer_list<Tensor*> outs);
  virtual void synchronize() {}

  // --- ops ---
  // out[t] = table[ids[t]] * scale.   out [T, D], table [V, D], ids [T] i32
  virtual void embedding(Tensor& out, const Tensor& table, const Tensor& ids, float scale) = 0;
  // out = x · wᵀ (+ bias).   out [T, N], x [T, K], w [N, K], bias [N] or undefined
  virtual void linear(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias) = 0;
  // Per row: out = x / rms(x) * (w + weight_offset).   x, out [R, C], w [C]
  // weight_offset is 1 for Gemma's (1 + w) norms, 0 otherwise. In place allowed.
  virtual void rms_norm(Tensor& out, const Tensor& x, const Tensor& w, float eps,
                        float weight_offset) = 0;
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
  // Writes the step's new K and V into their slots.   k, v [T, Hkv, Dh]
  virtual void write_kv(PagedKv& cache, const Tensor& k, const Tensor& v,
                        const StepTensors& step) = 0;
  // Causal attention of each new token over its row's cached keys (its own included),
  // GQA: query head h reads kv head h / (Hq / Hkv).   out, q [T, Hq, Dh]
  virtual void attention(Tensor& out, const Tensor& q, const PagedKv& cache,
                         const StepTensors& step, const AttentionParams& params) = 0;
  // out[s] = x[index[s]].   out [S, D], x [T, D], index [S] i32
  virtual void gather_rows(Tensor& out, const Tensor& x, const Tensor& index) = 0;
  // Mixture-of-experts routing: softmax over experts, keep the top k, optionally
  // renormalize the kept weights to sum to 1.
  //   weights [T, k] f32, ids [T, k] i32, logits [T, E]
  virtual void topk_route(Tensor& weights, Tensor& ids, const Tensor& logits, int k,
                          bool renormalize) = 0;
  // out[t] = Σ_j weights[t, j] · down_e(act(gate_e x) * up_e x), e = ids[t, j].
  //   out, x [T, D], gate_up [E, 2F, D], down [E, D, F]
  virtual void moe_experts(Tensor& out, const Tensor& x, const Tensor& weights, const Tensor& ids,
                           const Tensor& gate_up, const Tensor& down, Activation act) = 0;
};

// The CPU backend; `num_threads` 0 = the process-wide pool.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace tandem
