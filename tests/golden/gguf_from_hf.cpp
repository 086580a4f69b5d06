#include "gguf_from_hf.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/gguf_writer.h"

namespace tandem::test {
namespace {

using json = nlohmann::json;

struct Arch {
  std::string gguf;  // general.architecture
  bool permute = false, gemma = false, moe = false;
};

Arch arch_of(const std::string& model_type) {
  if (model_type == "llama") return {"llama", true};
  if (model_type == "mixtral") return {"llama", true, false, true};
  if (model_type == "qwen3_moe") return {"qwen3moe", false, false, true};
  if (model_type == "gemma2") return {"gemma2", false, true};
  if (model_type == "gemma3_text") return {"gemma3", false, true};
  if (model_type == "qwen2" || model_type == "qwen3" || model_type == "phi3") return {model_type};
  fail("gguf_from_hf: no conversion for model_type '{}'", model_type);
}

// convert_hf_to_gguf.py's LlamaModel.permute: within each head, row i + j·half goes to 2i + j.
Tensor permute_rows(const Tensor& t, int heads) {
  const int64_t rows = t.dim(0), head = rows / heads, half = head / 2;
  const size_t row_bytes = t.nbytes() / size_t(rows);
  Tensor out = Tensor::empty_host(t.dtype, t.shape);
  for (int64_t h = 0; h < heads; h++)
    for (int64_t i = 0; i < half; i++)
      for (int64_t j = 0; j < 2; j++)
        std::memcpy(static_cast<char*>(out.data) + size_t(h * head + 2 * i + j) * row_bytes,
                    static_cast<const char*>(t.data) + size_t(h * head + i + j * half) * row_bytes,
                    row_bytes);
  return out;
}

Tensor to_f32(const Tensor& t, float add) {
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  convert_to_f32(t.data, t.dtype, out.ptr<float>(), size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); i++) out.ptr<float>()[i] += add;
  return out;
}

Tensor to_f16(const Tensor& t) {
  Tensor f32 = to_f32(t, 0.f);
  Tensor out = Tensor::empty_host(DType::F16, t.shape);
  convert_from_f32(f32.ptr<float>(), out.data, DType::F16, size_t(t.numel()));
  return out;
}

// Llama 3 scaling as convert_hf_to_gguf.py writes it: one divisor per rotary pair.
std::vector<float> llama3_rope_freqs(const json& r, int head_dim) {
  const double theta = r["rope_theta"], factor = r["factor"], low = r["low_freq_factor"],
               high = r["high_freq_factor"], orig = r["original_max_position_embeddings"];
  std::vector<float> f;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(theta, double(i) / head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < orig / high) f.push_back(1.f);
    else if (wavelen > orig / low) f.push_back(float(factor));
    else {
      const double s = (orig / wavelen - low) / (high - low);
      f.push_back(float(1.0 / ((1 - s) / factor + s)));
    }
  }
  return f;
}

std::string layer_name(const std::string& rest, const Arch& a) {
  static const std::map<std::string, std::string> kNames = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},   {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"},   {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},    {"mlp.gate_up_proj.weight", "ffn_up.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},     {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
  };
  if (rest == "post_attention_layernorm.weight") return a.gemma ? "post_attention_norm.weight" : "ffn_norm.weight";
  auto it = kNames.find(rest);
  if (it == kNames.end()) fail("gguf_from_hf: no GGUF name for '{}'", rest);
  return it->second;
}

int head_dim_of(const json& c) {
  if (c.contains("head_dim") && c["head_dim"].is_number()) return c["head_dim"];
  return c["hidden_size"].get<int>() / c["num_attention_heads"].get<int>();
}

void add_metadata(GgufWriter& w, const json& c, const Arch& a) {
  const std::string A = a.gguf + ".";
  const int head_dim = head_dim_of(c);
  json rope = c.value("rope_parameters", json::object());
  if (rope.contains("full_attention")) rope = rope["full_attention"];
  w.add_string("general.architecture", a.gguf);
  w.add_u32(A + "block_count", c["num_hidden_layers"]);
  w.add_u32(A + "context_length", c["max_position_embeddings"]);
  w.add_u32(A + "embedding_length", c["hidden_size"]);
  w.add_u32(A + "feed_forward_length", c["intermediate_size"]);
  w.add_u32(A + "attention.head_count", c["num_attention_heads"]);
  w.add_u32(A + "attention.head_count_kv", c["num_key_value_heads"]);
  w.add_u32(A + "attention.key_length", head_dim);
  w.add_u32(A + "attention.value_length", head_dim);
  w.add_f32(A + "attention.layer_norm_rms_epsilon", c["rms_norm_eps"].get<float>());
  w.add_f32(A + "rope.freq_base", rope.value("rope_theta", 10000.0f));
  w.add_u32(A + "rope.dimension_count", uint32_t(head_dim * rope.value("partial_rotary_factor", 1.0)));
  w.add_u32("tokenizer.ggml.eos_token_id", c["eos_token_id"]);
  if (c.contains("sliding_window") && c["sliding_window"].is_number())
    w.add_u32(A + "attention.sliding_window", c["sliding_window"]);
  for (const char* k : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (c.contains(k) && c[k].is_number()) w.add_f32(A + k, c[k].get<float>());
  if (a.moe) {
    w.add_u32(A + "expert_count", c["num_local_experts"]);
    w.add_u32(A + "expert_used_count", c["num_experts_per_tok"]);
    if (c.contains("moe_intermediate_size"))
      w.add_u32(A + "expert_feed_forward_length", c["moe_intermediate_size"]);
  }
}

}  // namespace

void write_gguf_from_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& out,
                        const HfToGgufOptions& options) {
  std::ifstream in(hf_dir / "config.json");
  const json c = json::parse(in);
  const Arch a = arch_of(c["model_type"]);
  const Checkpoint ck = Checkpoint::open(hf_dir);
  std::vector<GgufWriter> writers(size_t(options.shards));
  GgufWriter& w = writers[0];  // metadata and the first tensors
  add_metadata(w, c, a);
  size_t added = 0;  // tensors are dealt to the shards in turn
  auto next = [&]() -> GgufWriter& { return writers[added++ % writers.size()]; };
  const int heads = c["num_attention_heads"], kv_heads = c["num_key_value_heads"];
  const bool tied = c.value("tie_word_embeddings", false) || options.drop_output;
  if (c.contains("rope_parameters") && c["rope_parameters"].value("rope_type", "") == "llama3") {
    std::vector<float> f = llama3_rope_freqs(c["rope_parameters"], head_dim_of(c));
    next().add_tensor("rope_freqs.weight", DType::F32, {int64_t(f.size())},
                 std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4));
  }
  auto matrix = [&](const Tensor& t) { return options.f16 && t.ndim() >= 2 ? to_f16(t) : t; };
  next().add_tensor("token_embd.weight", matrix(ck.get("model.embed_tokens.weight")));
  next().add_tensor("output_norm.weight", to_f32(ck.get("model.norm.weight"), a.gemma ? 1.f : 0.f));
  if (!tied) next().add_tensor("output.weight", matrix(ck.get("lm_head.weight")));
  std::map<std::string, std::vector<Tensor>> experts;  // GGUF name -> per-expert pieces
  for (int i = 0; i < c["num_hidden_layers"].get<int>(); i++) {
    const std::string hf = "model.layers." + std::to_string(i) + ".", blk = "blk." + std::to_string(i) + ".";
    for (const std::string& name : ck.names()) {
      if (!name.starts_with(hf)) continue;
      std::string rest = name.substr(hf.size());
      Tensor t = ck.get(name);
      if (rest.find(".experts.") != std::string::npos) {  // "mlp.experts.3.gate_proj.weight"
        const size_t e0 = rest.find(".experts.") + 9, e1 = rest.find('.', e0);
        const std::string proj = rest.substr(e1 + 1);
        const std::string stem = proj == "w1.weight" || proj == "gate_proj.weight" ? "ffn_gate_exps"
                                 : proj == "w3.weight" || proj == "up_proj.weight" ? "ffn_up_exps"
                                                                                   : "ffn_down_exps";
        auto& list = experts[blk + stem + ".weight"];
        const size_t e = std::stoul(rest.substr(e0, e1 - e0));
        if (list.size() <= e) list.resize(e + 1);
        list[e] = t;
        continue;
      }
      const std::string g = blk + layer_name(rest, a);
      if (t.ndim() == 1) t = to_f32(t, a.gemma && rest.ends_with("norm.weight") ? 1.f : 0.f);
      if (a.permute && rest.starts_with("self_attn.q_proj")) t = permute_rows(t, heads);
      if (a.permute && rest.starts_with("self_attn.k_proj")) t = permute_rows(t, kv_heads);
      next().add_tensor(g, matrix(t));
    }
  }
  for (auto& [name, list] : experts) {
    const Tensor& first = list.front();
    std::string bytes;
    for (const Tensor& t : list) bytes.append(static_cast<const char*>(t.data), t.nbytes());
    Tensor stacked = Tensor::empty_host(first.dtype, {int64_t(list.size()), first.dim(0), first.dim(1)});
    std::memcpy(stacked.data, bytes.data(), bytes.size());
    next().add_tensor(name, matrix(stacked));
  }
  if (writers.size() == 1) return w.write(out);
  // llama.cpp's gguf-split layout: split.* in every shard, the metadata in the first.
  const std::string prefix = (out.parent_path() / out.stem()).string();
  for (size_t k = 0; k < writers.size(); k++) {
    writers[k].add_u32("split.no", uint32_t(k));
    writers[k].add_u32("split.count", uint32_t(writers.size()));
    if (k == 0) writers[k].add_i32("split.tensors.count", int32_t(added));
    writers[k].write(fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, k + 1, writers.size()));
  }
}

}  // namespace tandem::test
