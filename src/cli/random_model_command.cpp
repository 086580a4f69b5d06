// `tandem random-model`: a Hugging Face folder with random weights of a real shape (and
// a byte-level tokenizer), so benchmarks never need a download; with --gguf TYPE the same
// model streamed into one GGUF file of that llama.cpp type (cli/gguf_export.h). Llama-style
// architectures (llama, mistral, qwen2, qwen3; mixtral and qwen3_moe with their experts),
// Gemma 4 text (random_model_gemma4.cpp) and multimodal Gemma 3 with its vision tower
// (random_model_gemma3.cpp), by preset name or from a config.json.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "cli/commands.h"
#include "cli/gguf_export.h"
#include "cli/random_model_gemma3.h"
#include "cli/random_model_gemma4.h"
#include "core/error.h"
#include "loader/fp8_quantize.h"
#include "loader/quant_scheme.h"
#include "loader/random_fill.h"
#include "loader/safetensors_writer.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

using json = nlohmann::json;

json llama_config(int hidden, int layers, int heads, int kv_heads, int ffn, int vocab, bool tied) {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
          {"hidden_size", hidden}, {"num_hidden_layers", layers}, {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads}, {"head_dim", hidden / heads},
          {"intermediate_size", ffn}, {"vocab_size", vocab}, {"tie_word_embeddings", tied},
          {"hidden_act", "silu"}, {"rms_norm_eps", 1e-5}, {"max_position_embeddings", 4096},
          {"rope_theta", 10000.0}, {"bos_token_id", 1}, {"eos_token_id", 2},
          {"torch_dtype", "bfloat16"}};
}

json preset(const std::string& name) {
  if (name == "llama-100m") return llama_config(768, 12, 12, 4, 2048, 32000, true);
  if (name == "qwen3-0.6b" || name == "qwen3-1.7b") {
    bool small = name == "qwen3-0.6b";
    json c = llama_config(small ? 1024 : 2048, 28, 16, 8, small ? 3072 : 6144, 151936, true);
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["model_type"] = "qwen3";
    c["head_dim"] = 128;
    c["rms_norm_eps"] = 1e-6;
    c["rope_theta"] = 1000000.0;
    c["max_position_embeddings"] = 40960;
    return c;
  }
  if (name == "llama-3.1-8b") {
    json c = llama_config(4096, 32, 32, 8, 14336, 128256, false);
    c["max_position_embeddings"] = 131072;
    c["rope_theta"] = 500000.0;
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
    return c;
  }
  if (name == "llama-3.2-1b") {  // speculative decoding's draft for the 8B shape
    json c = preset("llama-3.1-8b");
    c["hidden_size"] = 2048;
    c["num_hidden_layers"] = 16;
    c["head_dim"] = 64;
    c["intermediate_size"] = 8192;
    c["tie_word_embeddings"] = true;
    c["rope_scaling"]["factor"] = 32.0;
    return c;
  }
  if (name == "llama-3.1-70b") {
    json c = preset("llama-3.1-8b");
    c["hidden_size"] = 8192;
    c["num_hidden_layers"] = 80;
    c["num_attention_heads"] = 64;
    c["head_dim"] = 128;
    c["intermediate_size"] = 28672;
    return c;
  }
  if (auto gemma4 = gemma4_preset(name)) return *gemma4;
  if (auto gemma3 = gemma3_preset(name)) return *gemma3;
  fail("random-model: unknown preset '{}' (known: {})", name, random_model_presets());
}

// An FP8_DYNAMIC projection of random weights: the values random_chunk_fill's stream would
// hold, each row scaled by the stream's bound (±2√3·std, so no value saturates) and rounded
// to e4m3; weight_scale (bf16 [N, 1]) is that bound / 448 for every row.
void add_fp8_projection(SafetensorsWriter& w, const std::string& name, std::vector<int64_t> shape,
                        uint64_t seed, float stddev) {
  const float scale = fp8_row_scale(float(2.0 * std::sqrt(3.0)) * stddev);
  w.add_chunked(name, DType::F8E4M3, shape, [=](void* dst, size_t offset, size_t bytes) {
    std::vector<float> values(bytes);
    fill_random_f32(values.data(), bytes, seed, stddev, offset);
    uint8_t* out = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < bytes; i++) out[i] = f32_to_f8e4m3(values[i] / scale);
  });
  const int64_t N = shape[0];
  w.add(scale_tensor_name(name, "weight_scale"), DType::BF16, {N, 1}, [=](void* dst, size_t) {
    std::fill_n(static_cast<uint16_t*>(dst), size_t(N), f32_to_bf16(scale));
  });
}

// One tensor of a random Llama-style checkpoint: random_fill's stream `seed` scaled to
// `stddev`, or all ones (norms).
struct RandomTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool ones = false;
  uint64_t seed = 0;
  float stddev = 0.f;
};

// Every tensor a Llama-style checkpoint of config `c` holds, in the order (and so with the
// seeds) the folder has always been written with.
std::vector<RandomTensor> llama_tensors(const ModelConfig& c, uint64_t seed) {
  int64_t D = c.hidden_size, Dh = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  int64_t F = c.intermediate_size, V = c.vocab_size;
  uint64_t counter = seed * 1000003;
  std::vector<RandomTensor> out;
  auto normal = [&](std::string name, std::vector<int64_t> shape, int64_t fan_in) {
    out.push_back({std::move(name), std::move(shape), false, counter++,
                   float(1.0 / std::sqrt(double(fan_in)))});
  };
  auto ones = [&](std::string name, int64_t n) { out.push_back({std::move(name), {n}, true}); };
  normal("model.embed_tokens.weight", {V, D}, D);
  ones("model.norm.weight", D);
  if (!c.tie_word_embeddings) normal("lm_head.weight", {V, D}, D);
  for (int i = 0; i < c.num_layers; i++) {
    std::string L = fmt::format("model.layers.{}.", i);
    ones(L + "input_layernorm.weight", D);
    ones(L + "post_attention_layernorm.weight", D);
    normal(L + "self_attn.q_proj.weight", {Hq * Dh, D}, D);
    normal(L + "self_attn.k_proj.weight", {Hkv * Dh, D}, D);
    normal(L + "self_attn.v_proj.weight", {Hkv * Dh, D}, D);
    normal(L + "self_attn.o_proj.weight", {D, Hq * Dh}, Hq * Dh);
    if (c.model_type == "qwen3" || c.model_type == "qwen3_moe") {
      ones(L + "self_attn.q_norm.weight", Dh);
      ones(L + "self_attn.k_norm.weight", Dh);
    }
    if (c.model_type == "qwen2")
      for (auto [p, n] : {std::pair{"q", Hq}, {"k", Hkv}, {"v", Hkv}})
        normal(L + "self_attn." + p + "_proj.bias", {n * Dh}, 100);
    const bool moe = c.num_experts > 0 && (i + 1) % c.decoder_sparse_step == 0 &&
                     std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), i) ==
                         c.mlp_only_layers.end();  // as DecoderModel decides (decoder.cpp)
    if (!moe) {
      normal(L + "mlp.gate_proj.weight", {F, D}, D);
      normal(L + "mlp.up_proj.weight", {F, D}, D);
      normal(L + "mlp.down_proj.weight", {D, F}, F);
      continue;
    }
    // Mixtral's experts (w1 gate, w3 up, w2 down) or Qwen3-MoE's, and the router.
    const bool mixtral = c.model_type == "mixtral";
    const std::string M = L + (mixtral ? "block_sparse_moe." : "mlp.");
    const int64_t E = c.num_experts, Fe = c.moe_intermediate_size;
    normal(M + "gate.weight", {E, D}, D);
    for (int64_t e = 0; e < E; e++) {
      const std::string X = M + fmt::format("experts.{}.", e);
      normal(X + (mixtral ? "w1.weight" : "gate_proj.weight"), {Fe, D}, D);
      normal(X + (mixtral ? "w3.weight" : "up_proj.weight"), {Fe, D}, D);
      normal(X + (mixtral ? "w2.weight" : "down_proj.weight"), {D, Fe}, Fe);
    }
  }
  return out;
}

// Adds every tensor of llama_tensors in `dtype`; with `fp8`, the projections as FP8_DYNAMIC
// (add_fp8_projection).
void add_llama_tensors(SafetensorsWriter& w, const ModelConfig& c, DType dtype, uint64_t seed,
                       bool fp8 = false) {
  for (const RandomTensor& t : llama_tensors(c, seed)) {
    if (t.ones) {
      const int64_t n = t.shape[0];
      w.add(t.name, dtype, t.shape, [=](void* dst, size_t) {
        std::vector<float> one(size_t(n), 1.f);
        convert_from_f32(one.data(), dst, dtype, size_t(n));
      });
    } else if (fp8 && t.shape.size() == 2 && quantizable_weight_name(t.name)) {
      add_fp8_projection(w, t.name, t.shape, t.seed, t.stddev);
    } else {
      w.add(t.name, dtype, t.shape, [=](void* dst, size_t bytes) {
        fill_random(dst, dtype, bytes / dtype_size(dtype), t.seed, t.stddev);
      });
    }
  }
}

// The same tensors as GGUF export sources: f32 rows holding exactly the values the folder
// stores in `dtype` (so a GGUF written from here equals one quantized from the folder).
std::vector<HfTensorSource> llama_sources(const ModelConfig& c, DType dtype, uint64_t seed) {
  std::vector<HfTensorSource> out;
  for (const RandomTensor& t : llama_tensors(c, seed)) {
    Shape shape;
    shape.ndim = int(t.shape.size());
    for (size_t d = 0; d < t.shape.size(); d++) shape.dims[d] = t.shape[d];
    const int64_t cols = t.shape.back();
    out.push_back({t.name, shape, [t, dtype, cols](float* dst, int64_t first, int64_t count) {
                     const size_t n = size_t(count * cols);
                     if (t.ones) {
                       std::fill_n(dst, n, 1.f);  // norms
                       return;
                     }
                     std::vector<char> stored(n * dtype_size(dtype));
                     fill_random(stored.data(), dtype, n, t.seed, t.stddev, uint64_t(first * cols));
                     convert_to_f32(stored.data(), dtype, dst, n);
                   }});
  }
  return out;
}

void write_json(const std::filesystem::path& p, const json& j) {
  std::ofstream out(p);
  out << j.dump(2) << "\n";
  if (!out) fail("{}: write failed", p.string());
}

void write_tokenizer_files(const std::filesystem::path& dir, const json& cj, int vocab_size) {
  write_json(dir / "generation_config.json",
             {{"eos_token_id", cj.value("eos_token_id", 2)}, {"do_sample", false}});
  std::ofstream(dir / "tokenizer.json") << byte_level_tokenizer_json(vocab_size);
  write_json(dir / "tokenizer_config.json",
             {{"eos_token", "<|im_end|>"},
              {"pad_token", "<|endoftext|>"},
              {"chat_template",
               "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% "
               "endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}});
}

// --gguf TYPE: the same model (the values the folder would hold in `dtype`) streamed into one
// GGUF file of that type, the tokenizer the folder would have in its metadata.
int write_random_gguf(const RandomModelOptions& o, json cj, const ModelConfig& c, DType dtype) {
  const auto type = gguf_file_type_from_name(*o.gguf);
  if (!type) fail("--gguf: '{}' is not one of {}", *o.gguf, kGgufFileTypes);
  const bool llama_style = c.model_type == "llama" || c.model_type == "mistral" ||
                           c.model_type == "qwen2" || c.model_type == "qwen3" ||
                           c.model_type == "mixtral" || c.model_type == "qwen3_moe";
  if (!llama_style || o.dtype == "fp8")
    fail(
        "random-model --gguf: llama-style models (and mixtral, qwen3_moe) in bf16 or f32 only "
        "(got {}, --dtype {})",
        c.model_type, o.dtype);
  if (std::filesystem::is_directory(o.out))
    fail("--out {}: a folder; --gguf writes one file", o.out);
  const auto tok_dir = std::filesystem::path(o.out).concat(".tokenizer.tmp");
  std::filesystem::create_directories(tok_dir);
  write_tokenizer_files(tok_dir, cj, c.vocab_size);
  cj["torch_dtype"] = o.dtype == "f32" ? "float32" : "bfloat16";
  auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  try {
    bytes = write_gguf_model(cj, std::filesystem::path(o.out).stem().string(), tok_dir,
                             llama_sources(c, dtype, o.seed), *type, o.out);
  } catch (...) {
    std::filesystem::remove_all(tok_dir);
    throw;
  }
  std::filesystem::remove_all(tok_dir);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(stderr, "wrote {} ({}: {:.2f} GB of weights in {:.1f} s, {:.2f} GB/s)\n", o.out,
             gguf_file_type_name(*type), double(bytes) / 1e9, secs, double(bytes) / 1e9 / secs);
  return 0;
}

}  // namespace

std::string random_model_presets() {
  return std::string("llama-100m, qwen3-0.6b, qwen3-1.7b, llama-3.2-1b, llama-3.1-8b, llama-3.1-70b, ") +
         kGemma4Presets + ", " + kGemma3Presets;
}

int run_random_model(const RandomModelOptions& o) {
  try {
    if (o.like.has_value() == o.config.has_value()) fail("give exactly one of --like and --config");
    json cj;
    if (o.like) {
      cj = preset(*o.like);
    } else {
      std::ifstream in(*o.config);
      if (!in) fail("{}: cannot open", *o.config);
      cj = json::parse(in, nullptr, false);
      if (cj.is_discarded()) fail("{}: invalid JSON", *o.config);
    }
    ModelConfig c = ModelConfig::parse(cj, o.like ? *o.like : *o.config);
    const bool gemma3 = c.multimodal_type == "gemma3";
    static const char* supported[] = {"llama",       "mistral", "qwen2",    "qwen3",
                                      "gemma4_text", "mixtral", "qwen3_moe"};
    if (!gemma3 &&
        std::find(std::begin(supported), std::end(supported), c.model_type) == std::end(supported))
      fail(
          "random-model: model_type '{}' is not supported (llama, mistral, qwen2, qwen3, "
          "mixtral, qwen3_moe, gemma4_text, multimodal gemma3)",
          c.model_type);
    const bool fp8 = o.dtype == "fp8";
    DType dtype = o.dtype == "bf16" || fp8 ? DType::BF16 : o.dtype == "f32" ? DType::F32
                  : (fail("--dtype must be bf16, f32 or fp8 (got {})", o.dtype), DType::F32);
    if (gemma3 && !(cj.contains("vision_config") && cj["vision_config"].is_object()))
      fail("random-model: a gemma3 config needs a vision_config (the SigLIP tower)");
    if (fp8 && (c.model_type == "gemma4_text" || gemma3))
      fail("random-model: --dtype fp8 is written for llama-style models only");
    if (o.gguf) return write_random_gguf(o, cj, c, dtype);
    std::filesystem::create_directories(o.out);
    auto start = std::chrono::steady_clock::now();
    SafetensorsWriter w;
    if (gemma3)
      add_gemma3_tensors(w, c, dtype, o.seed);
    else if (c.model_type == "gemma4_text")
      add_gemma4_tensors(w, c, dtype, o.seed);
    else
      add_llama_tensors(w, c, dtype, o.seed, fp8);
    w.write_sharded(o.out, uint64_t(5) << 30);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cj["torch_dtype"] = o.dtype == "f32" ? "float32" : "bfloat16";
    if (fp8) cj["quantization_config"] = fp8_dynamic_quantization_config({"lm_head"});
    write_json(std::filesystem::path(o.out) / "config.json", cj);
    if (gemma3)
      write_gemma3_side_files(o.out, c);
    else
      write_tokenizer_files(o.out, cj, c.vocab_size);
    double gb = double(w.total_bytes()) / 1e9;
    fmt::print(stderr, "wrote {} ({:.2f} GB of weights in {:.1f} s, {:.2f} GB/s)\n", o.out, gb, secs,
               gb / secs);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
