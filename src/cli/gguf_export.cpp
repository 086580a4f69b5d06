#include "cli/gguf_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/block_quant.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "loader/gguf_writer.h"
#include "model/config.h"
#include "tokenizer/gguf_vocab_writer.h"

namespace tandem::cli {
namespace {

using json = nlohmann::json;

std::string gguf_arch(const std::string& model_type) {
  if (model_type == "llama" || model_type == "mistral" || model_type == "mixtral") return "llama";
  if (model_type == "qwen2" || model_type == "qwen3") return model_type;
  if (model_type == "qwen3_moe") return "qwen3moe";
  fail(
      "GGUF export: model_type '{}' is not written (llama, mistral, qwen2, qwen3, mixtral, "
      "qwen3_moe)",
      model_type);
}

// What llama.cpp's architectures hold and this export writes; anything else is refused by name.
void check_exportable(const ModelConfig& c) {
  const RopeConfig& r = c.rope.at(LayerKind::Full);
  if (r.type != "default" && r.type != "llama3")
    fail("GGUF export: rope type '{}' is not written (default, llama3)", r.type);
  if (r.partial_rotary_factor != 1.0)
    fail("GGUF export: partial_rotary_factor {} is not written", r.partial_rotary_factor);
  if (c.sliding_window > 0 && c.sliding_window < c.max_position_embeddings)
    fail("GGUF export: sliding_window {}: llama.cpp's {} architecture has none", c.sliding_window,
         gguf_arch(c.model_type));
  if (c.num_experts > 0 && (c.decoder_sparse_step != 1 || !c.mlp_only_layers.empty()))
    fail(
        "GGUF export: experts on some layers only (decoder_sparse_step {}, {} mlp_only_layers) "
        "are not written",
        c.decoder_sparse_step, c.mlp_only_layers.size());
  if (c.mlp_bias) fail("GGUF export: mlp_bias is not written");
}

void add_metadata(GgufWriter& w, const ModelConfig& c, const std::string& name, GgufFileType type) {
  const std::string a = gguf_arch(c.model_type), A = a + ".";
  w.add_string("general.architecture", a);
  w.add_string("general.name", name);
  w.add_u32("general.file_type", uint32_t(type));
  if (type != GgufFileType::F32 && type != GgufFileType::F16)
    w.add_u32("general.quantization_version", 2);
  w.add_u32(A + "vocab_size", uint32_t(c.vocab_size));
  w.add_u32(A + "context_length", uint32_t(c.max_position_embeddings));
  w.add_u32(A + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(A + "block_count", uint32_t(c.num_layers));
  w.add_u32(A + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(A + "attention.head_count", uint32_t(c.num_heads));
  w.add_u32(A + "attention.head_count_kv", uint32_t(c.num_kv_heads));
  w.add_u32(A + "attention.key_length", uint32_t(c.head_dim));
  w.add_u32(A + "attention.value_length", uint32_t(c.head_dim));
  w.add_f32(A + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.add_f32(A + "rope.freq_base", float(c.rope.at(LayerKind::Full).theta));
  w.add_u32(A + "rope.dimension_count", uint32_t(c.head_dim));
  if (c.num_experts == 0) return;
  w.add_u32(A + "expert_count", uint32_t(c.num_experts));
  w.add_u32(A + "expert_used_count", uint32_t(c.num_experts_per_tok));
  if (a == "qwen3moe") {
    w.add_u32(A + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
    w.add_bool(A + "expert_weights_norm", c.norm_topk_prob);
  }
}

// The per-expert tensors ("….experts.7.gate_proj.weight", [F, D] each) stacked into one
// source per layer and projection ("….experts.gate_proj.weight", [E, F, D]), as llama.cpp
// stores them; every other source as it is. The stacks read the sources in `tensors`.
std::vector<HfTensorSource> stack_experts(const std::vector<HfTensorSource>& tensors, int64_t E) {
  static const std::regex expert(R"((.+\.experts\.)(\d+)\.(.+))");
  std::vector<HfTensorSource> out;
  std::map<std::string, std::vector<const HfTensorSource*>> stacks;
  for (const HfTensorSource& t : tensors) {
    std::smatch m;
    if (!std::regex_match(t.name, m, expert)) {
      out.push_back(t);
      continue;
    }
    const int64_t e = std::stoll(m[2].str());
    if (e >= E) fail("GGUF export: tensor '{}' is expert {} of {}", t.name, e, E);
    std::vector<const HfTensorSource*>& parts = stacks[m[1].str() + m[3].str()];
    parts.resize(size_t(E), nullptr);
    parts[size_t(e)] = &t;
  }
  for (auto& stack : stacks) {
    const std::string& name = stack.first;
    // A named copy for the lambda below: clang 14 (the sanitizer job's) cannot capture a
    // structured binding.
    const std::vector<const HfTensorSource*> parts = stack.second;
    for (int64_t e = 0; e < E; e++)
      if (parts[size_t(e)] == nullptr || parts[size_t(e)]->shape.ndim != 2 ||
          parts[size_t(e)]->shape != parts[0]->shape)
        fail("GGUF export: '{}' lacks expert {} (or its shape differs from expert 0's)", name, e);
    const int64_t rows = parts[0]->shape.dims[0], cols = parts[0]->shape.dims[1];
    out.push_back(
        {name, Shape{E, rows, cols}, [parts, rows, cols](float* dst, int64_t first, int64_t count) {
           for (int64_t r = first; r < first + count;) {  // expert by expert
             const int64_t e = r / rows, n = std::min(first + count, (e + 1) * rows) - r;
             parts[size_t(e)]->rows(dst + (r - first) * cols, r % rows, n);
             r += n;
           }
         }});
  }
  return out;
}

// Where a tensor goes in the file: rope_freqs, token_embd, the layers in order, output_norm,
// output (convert_hf_to_gguf.py's order).
std::tuple<int, int, std::string> file_order(const std::string& gguf) {
  if (gguf == "rope_freqs.weight") return {0, 0, gguf};
  if (gguf == "token_embd.weight") return {1, 0, gguf};
  if (gguf.starts_with("blk.")) return {2, std::stoi(gguf.substr(4)), gguf};
  return {gguf == "output_norm.weight" ? 3 : 4, 0, gguf};
}

// GGUF row r of a permuted Q/K tensor is Hugging Face row perm(r) of the same head: within a
// head of `head` rows, GGUF row 2i + j holds HF row i + j·head/2.
int64_t unpermuted_row(int64_t r, int64_t head) {
  const int64_t h = r / head, w = r % head;
  return h * head + w / 2 + (w % 2) * (head / 2);
}

void encode_row(DType type, const float* x, void* dst, int64_t cols) {
  if (dtype_is_block(type)) return quantize_row(type, x, dst, cols);
  convert_from_f32(x, dst, type, size_t(cols));
}

// The RowFill of a tensor: f32 rows from the source, permuted (head > 0) and encoded in
// parallel. Chunks start on head boundaries (the writer's row_group), so a chunk's rows are
// a permutation of the source's same rows.
GgufWriter::RowFill encoding_fill(const HfTensorSource& src, DType type, int64_t head) {
  const int64_t cols = src.shape.dims[size_t(src.shape.ndim - 1)];
  if (src.shape.ndim == 1 && head > 0)  // a bias: its values are the rows to permute
    return [&src, type, head, cols](void* dst, int64_t, int64_t) {
      std::vector<float> v(static_cast<size_t>(cols)), p(static_cast<size_t>(cols));
      src.rows(v.data(), 0, 1);
      for (int64_t r = 0; r < cols; r++) p[size_t(r)] = v[size_t(unpermuted_row(r, head))];
      encode_row(type, p.data(), dst, cols);
    };
  return [&src, type, head, cols](void* dst, int64_t first, int64_t count) {
    std::vector<float> rows(size_t(count * cols));
    src.rows(rows.data(), first, count);
    const size_t row_bytes = dtype_row_bytes(type, cols);
    std::mutex mutex;
    std::string error;  // the first row's refusal (a NaN weight): the pool does not carry throws
    ThreadPool::global().parallel_for(count, [&](int64_t a, int64_t b) {
      for (int64_t r = a; r < b; r++) {
        const int64_t from = head > 0 ? unpermuted_row(r, head) : r;
        try {
          encode_row(type, rows.data() + from * cols,
                     static_cast<char*>(dst) + size_t(r) * row_bytes, cols);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex);
          if (error.empty()) error = fmt::format("row {}: {}", first + from, e.what());
          return;
        }
      }
    });
    if (!error.empty()) fail("GGUF export: tensor '{}' {}", src.name, error);
  };
}

}  // namespace

std::string gguf_tensor_name(const std::string& hf) {
  static const std::map<std::string, std::string> kTop = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      // The router and the stacked experts (stack_experts) of Qwen3-MoE and Mixtral.
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.experts.gate_proj.weight", "ffn_gate_exps.weight"},
      {"mlp.experts.up_proj.weight", "ffn_up_exps.weight"},
      {"mlp.experts.down_proj.weight", "ffn_down_exps.weight"},
      {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
      {"block_sparse_moe.experts.w1.weight", "ffn_gate_exps.weight"},
      {"block_sparse_moe.experts.w3.weight", "ffn_up_exps.weight"},
      {"block_sparse_moe.experts.w2.weight", "ffn_down_exps.weight"},
  };
  if (auto it = kTop.find(hf); it != kTop.end()) return it->second;
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (std::regex_match(hf, m, layer))
    if (auto it = kLayer.find(m[2].str()); it != kLayer.end())
      return "blk." + m[1].str() + "." + it->second;
  fail("GGUF export: no GGUF name for the tensor '{}'", hf);
}

GgufPlanModel gguf_plan_model(const ModelConfig& c) {
  return {gguf_arch(c.model_type), c.num_layers, c.num_heads, c.num_kv_heads,
          c.tie_word_embeddings};
}

std::vector<float> llama3_rope_divisors(const RopeConfig& r, int head_dim) {
  const double orig = r.original_max_position_embeddings.value_or(8192);
  std::vector<float> f;
  for (int i = 0; i < head_dim; i += 2) {
    const double wavelen = 2 * M_PI * std::pow(r.theta, double(i) / head_dim);
    if (wavelen < orig / r.high_freq_factor)
      f.push_back(1.f);
    else if (wavelen > orig / r.low_freq_factor)
      f.push_back(float(r.factor));
    else {
      const double s =
          (orig / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      f.push_back(float(1.0 / ((1 - s) / r.factor + s)));
    }
  }
  return f;
}

std::vector<HfTensorSource> checkpoint_sources(const Checkpoint& ck) {
  std::vector<HfTensorSource> out;
  for (const std::string& name : ck.names()) {
    // Other safetensors files beside the weights (an oracle's golden.safetensors) stay out.
    if (ck.file_of(name).path().filename().string().rfind("model", 0) != 0) continue;
    const Tensor t = ck.get(name);
    if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
      fail("GGUF export: tensor '{}' is {} (a 16- or 32-bit checkpoint is needed)", name,
           dtype_name(t.dtype));
    const int64_t cols = t.shape.dims[size_t(t.shape.ndim - 1)];
    out.push_back({name, t.shape, [t, cols](float* dst, int64_t first, int64_t count) {
                     const char* base = static_cast<const char*>(t.data);
                     const size_t row_bytes = dtype_row_bytes(t.dtype, cols);
                     ThreadPool::global().parallel_for(count, [&](int64_t a, int64_t b) {
                       convert_to_f32(base + size_t(first + a) * row_bytes, t.dtype, dst + a * cols,
                                      size_t((b - a) * cols));
                     });
                   }});
  }
  return out;
}

uint64_t write_gguf_model(const json& config, const std::string& name,
                          const std::filesystem::path& tokenizer_dir,
                          const std::vector<HfTensorSource>& sources, GgufFileType type,
                          const std::filesystem::path& out) {
  const ModelConfig c = ModelConfig::parse(config, "config.json");
  check_exportable(c);
  const std::vector<HfTensorSource> tensors =
      c.num_experts > 0 ? stack_experts(sources, c.num_experts) : sources;
  const GgufPlanModel plan = gguf_plan_model(c);
  GgufWriter w;
  add_metadata(w, c, name, type);
  add_gguf_vocab(w, tokenizer_dir, config);
  const RopeConfig& rope = c.rope.at(LayerKind::Full);
  std::vector<float> divisors;
  if (rope.type == "llama3") divisors = llama3_rope_divisors(rope, c.head_dim);
  std::vector<std::pair<std::tuple<int, int, std::string>, const HfTensorSource*>> order;
  for (const HfTensorSource& t : tensors) {
    if (t.name == "lm_head.weight" && c.tie_word_embeddings) continue;
    order.push_back({file_order(gguf_tensor_name(t.name)), &t});
  }
  std::sort(order.begin(), order.end(), [](auto& x, auto& y) { return x.first < y.first; });
  if (!c.tie_word_embeddings && std::none_of(order.begin(), order.end(), [](auto& o) {
        return std::get<2>(o.first) == "output.weight";
      }))
    fail("GGUF export: no lm_head.weight, and tie_word_embeddings is false");
  if (!divisors.empty())
    w.add_tensor("rope_freqs.weight", DType::F32, {int64_t(divisors.size())},
                 std::string(reinterpret_cast<const char*>(divisors.data()), divisors.size() * 4));
  uint64_t bytes = divisors.size() * 4;
  for (const auto& [key, src] : order) {
    const std::string& g = std::get<2>(key);
    const DType dtype = gguf_tensor_type(type, plan, g, src->shape);
    const bool permute =
        plan.arch == "llama" && (g.ends_with("attn_q.weight") || g.ends_with("attn_k.weight") ||
                                 g.ends_with("attn_q.bias") || g.ends_with("attn_k.bias"));
    const int64_t head = permute ? c.head_dim : 0;
    const int64_t group = src->shape.ndim > 1 ? std::max<int64_t>(1, head) : 1;
    w.add_tensor(g, dtype, src->shape, encoding_fill(*src, dtype, head), group);
    Tensor probe;
    probe.dtype = dtype;
    probe.shape = src->shape;
    bytes += probe.nbytes();
  }
  w.write(out);
  return bytes;
}

}  // namespace tandem::cli
