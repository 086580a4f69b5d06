// GGUF tensor names → the Hugging Face names tandem's weight maps expect
// (model/gguf_translate.h). llama.cpp's names (src/llama-arch.cpp): token_embd, output_norm,
// output, rope_freqs, and per block "blk.N." attn_norm, attn_q / attn_k / attn_v (or one
// fused attn_qkv), attn_output, attn_q_norm / attn_k_norm, ffn_norm, ffn_gate / ffn_up /
// ffn_down, ffn_gate_inp and the stacked experts ffn_{gate,up,down}_exps [E, N, K], and
// Gemma's post_attention_norm / post_ffw_norm. Every tensor of the file must find a place:
// one that would be silently ignored is an error.
#include <charconv>

#include "core/error.h"
#include "model/gguf_translate.h"

namespace tandem {
namespace {

using json = nlohmann::json;
using Aliases = std::map<std::string, GgufAlias>;

// What a family of architectures changes in the names and the tensors.
struct Family {
  std::string model_type;
  bool llama_rope = false;  // Q/K rows stored permuted for llama.cpp's interleaved RoPE
  bool gemma = false;       // norms stored as 1 + w; sandwich norms
  bool phi3 = false;        // q|k|v and gate|up stored fused
  std::string moe_prefix;   // "block_sparse_moe." (Mixtral), "mlp." (Qwen3-MoE), "" (dense)
  int heads = 0, kv_heads = 0, head_dim = 0, experts = 0;
};

class Namer {
 public:
  Namer(const GgufModel& model, Family f) : model_(model), f_(std::move(f)) {}

  void add_global(const std::string& name) {
    if (name == "rope_freqs.weight") return;  // a RoPE parameter (translate_gguf reads it)
    if (name == "token_embd.weight") return set("model.embed_tokens.weight", {name});
    if (name == "output_norm.weight") return set("model.norm.weight", norm(name));
    if (name == "output.weight") return set("lm_head.weight", {name});
    unplaced(name);
  }

  void add_block(const std::string& name, int64_t block, std::string_view rest) {
    const std::string L = "model.layers." + std::to_string(block) + ".";
    const std::string A = L + "self_attn.", M = L + "mlp.";
    const std::string stem(rest.substr(0, rest.find('.')));  // "attn_q" of "attn_q.bias"
    const std::string suffix(rest.substr(rest.find('.') + 1));  // "bias"
    if (stem == "attn_norm") return set(L + "input_layernorm." + suffix, norm(name));
    if (stem == "attn_q") return set(A + "q_proj." + suffix, permuted(name, f_.heads));
    if (stem == "attn_k") return set(A + "k_proj." + suffix, permuted(name, f_.kv_heads));
    if (stem == "attn_v") return set(A + "v_proj." + suffix, {name}, !f_.phi3);
    if (stem == "attn_qkv") return add_qkv(name, A, suffix);
    if (stem == "attn_output") return set(A + "o_proj." + suffix, {name});
    if (stem == "attn_q_norm") return set(A + "q_norm." + suffix, norm(name));
    if (stem == "attn_k_norm") return set(A + "k_norm." + suffix, norm(name));
    if (stem == "ffn_norm")
      return set(L + (f_.gemma ? "pre_feedforward_layernorm." : "post_attention_layernorm.") + suffix, norm(name));
    if (stem == "post_attention_norm" && f_.gemma) return set(L + "post_attention_layernorm." + suffix, norm(name));
    if (stem == "post_ffw_norm" && f_.gemma) return set(L + "post_feedforward_layernorm." + suffix, norm(name));
    if (stem == "ffn_gate") return set(M + "gate_proj." + suffix, {name}, !f_.phi3);
    if (stem == "ffn_up") return set(M + (f_.phi3 ? "gate_up_proj." : "up_proj.") + suffix, {name});
    if (stem == "ffn_down") return set(M + "down_proj." + suffix, {name});
    if (!f_.moe_prefix.empty()) {
      const std::string E = L + f_.moe_prefix;
      const bool mixtral = f_.moe_prefix == "block_sparse_moe.";
      if (stem == "ffn_gate_inp") return set(E + "gate." + suffix, {name});
      if (stem == "ffn_gate_exps") return add_experts(name, E, mixtral ? "w1." : "gate_proj.", suffix);
      if (stem == "ffn_up_exps") return add_experts(name, E, mixtral ? "w3." : "up_proj.", suffix);
      if (stem == "ffn_down_exps") return add_experts(name, E, mixtral ? "w2." : "down_proj.", suffix);
    }
    unplaced(name);
  }

  Aliases take() { return std::move(aliases_); }

 private:
  void set(const std::string& hf_name, GgufAlias alias, bool allowed = true) {
    if (!allowed) unplaced(alias.gguf_name);
    aliases_[hf_name] = std::move(alias);
  }
  GgufAlias norm(const std::string& name) const { return {.gguf_name = name, .add = f_.gemma ? -1.f : 0.f}; }
  GgufAlias permuted(const std::string& name, int heads) const {
    return {.gguf_name = name, .unpermute_heads = f_.llama_rope ? heads : 0};
  }

  // A fused q|k|v: Phi-3's own layout; elsewhere split into the q, k and v the map fuses
  // again (views of its rows), the llama architecture's q and k rows un-permuted.
  void add_qkv(const std::string& name, const std::string& A, const std::string& suffix) {
    if (f_.phi3) return set(A + "qkv_proj." + suffix, {name});
    const int64_t q = int64_t(f_.heads) * f_.head_dim, kv = int64_t(f_.kv_heads) * f_.head_dim;
    auto rows = [&](int64_t first, int64_t count, int heads) {
      return GgufAlias{.gguf_name = name, .rows = GgufAlias::Rows{first, count},
                       .unpermute_heads = f_.llama_rope ? heads : 0};
    };
    set(A + "q_proj." + suffix, rows(0, q, f_.heads));
    set(A + "k_proj." + suffix, rows(q, kv, f_.kv_heads));
    set(A + "v_proj." + suffix, rows(q + kv, kv, 0));
  }

  // Stacked experts [E, N, K]: expert e is a view of rows [e, e + 1) taken as [N, K].
  void add_experts(const std::string& name, const std::string& E, const std::string& proj,
                   const std::string& suffix) {
    const GgufTensorInfo& info = *model_.find(name)->info;
    if (info.shape.ndim != 3 || info.shape[0] != f_.experts)
      fail("{}: tensor '{}' is {}, expected [{}, N, K] (one slice per expert)", model_.path().string(),
           name, info.shape.str(), f_.experts);
    for (int e = 0; e < f_.experts; e++)
      set(E + "experts." + std::to_string(e) + "." + proj + suffix,
          {.gguf_name = name, .rows = GgufAlias::Rows{e, 1}});
  }

  [[noreturn]] void unplaced(const std::string& name) const {
    fail("{}: tensor '{}' has no place in tandem's {} (an unsupported variant of the architecture?)",
         model_.path().string(), name, f_.model_type);
  }

  const GgufModel& model_;
  Family f_;
  Aliases aliases_;
};

}  // namespace

Aliases gguf_tensor_aliases(const GgufModel& model, const json& config) {
  Family f;
  f.model_type = config.at("model_type").get<std::string>();
  f.llama_rope = f.model_type == "llama" || f.model_type == "mixtral";
  f.gemma = f.model_type == "gemma2" || f.model_type == "gemma3_text";
  f.phi3 = f.model_type == "phi3";
  f.moe_prefix = f.model_type == "mixtral" ? "block_sparse_moe." : f.model_type == "qwen3_moe" ? "mlp." : "";
  f.heads = config.at("num_attention_heads").get<int>();
  f.kv_heads = config.at("num_key_value_heads").get<int>();
  f.head_dim = config.at("head_dim").get<int>();
  f.experts = config.value("num_experts", 0);
  Namer namer(model, f);
  for (std::string_view view : model.tensor_names()) {
    const std::string name(view);
    if (!name.starts_with("blk.")) {
      namer.add_global(name);
      continue;
    }
    int64_t block = 0;
    auto [end, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), block);
    const size_t dot = size_t(end - name.data());
    if (ec != std::errc() || dot >= name.size() || name[dot] != '.' || name.find('.', dot + 1) == std::string::npos)
      fail("{}: tensor '{}' is not named blk.N.NAME.weight", model.path().string(), name);
    namer.add_block(name, block, std::string_view(name).substr(dot + 1));
  }
  return namer.take();
}

}  // namespace tandem
