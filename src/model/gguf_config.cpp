// GGUF metadata → config.json (model/gguf_translate.h). Keys are llama.cpp's
// (gguf-py/gguf/constants.py): "{arch}.block_count", "{arch}.attention.head_count", ...
// Every count is range-checked here, naming its GGUF key, before anything is sized by it.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/gguf_translate.h"

namespace tandem {
namespace {

using json = nlohmann::json;

struct GgufArch {
  const char* gguf_name;
  const char* model_type;  // the registry's; llama with experts becomes mixtral
};

const GgufArch kGgufArchitectures[] = {
    {"llama", "llama"},   {"qwen2", "qwen2"},   {"qwen3", "qwen3"}, {"qwen3moe", "qwen3_moe"},
    {"gemma2", "gemma2"}, {"gemma3", "gemma3_text"}, {"phi3", "phi3"},
};

// Keys of one architecture ("llama.block_count"), with the checks every count needs.
class ArchKeys {
 public:
  ArchKeys(const GgufMetadata& md, std::string arch) : md_(md), arch_(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }
  const GgufMetadata& md() const { return md_; }
  const std::string& arch() const { return arch_; }

  // A count in [min, INT32_MAX] (tandem's configs hold ints).
  std::optional<int64_t> count(std::string_view suffix, int64_t min = 1) const {
    std::string k = key(suffix);
    auto v = md_.get_int(k);
    if (v && (*v < min || *v > std::numeric_limits<int32_t>::max()))
      fail("{} is {}, outside {}..{}", md_.where(k), *v, min, std::numeric_limits<int32_t>::max());
    return v;
  }
  int64_t require_count(std::string_view suffix) const {
    auto v = count(suffix);
    if (!v) fail("{}: required metadata '{}' is missing", md_.source(), key(suffix));
    return *v;
  }
  // A per-layer count: a scalar, or an array of one value per layer (returned as given).
  std::optional<json> layer_counts(std::string_view suffix, int64_t layers, int64_t min) const {
    std::string k = key(suffix);
    const GgufValue* v = md_.find(k);
    if (!v || v->type() != GgufType::Array) {
      auto c = count(suffix, min);
      return c ? std::optional<json>(*c) : std::nullopt;
    }
    if (int64_t(v->count()) != layers)
      fail("{} has {} entries for {} layers", md_.where(k), v->count(), layers);
    std::vector<int64_t> values = v->as_ints(md_.where(k));
    for (int64_t x : values)
      if (x < min || x > std::numeric_limits<int32_t>::max())
        fail("{} holds {}, outside {}..{}", md_.where(k), x, min, std::numeric_limits<int32_t>::max());
    return json(values);
  }
  // The same where tandem needs one value for every layer.
  std::optional<int64_t> uniform_count(std::string_view suffix, int64_t layers, int64_t min = 1) const {
    auto v = layer_counts(suffix, layers, min);
    if (!v) return std::nullopt;
    if (v->is_number()) return v->get<int64_t>();
    for (const json& x : *v)
      if (x != (*v)[0])
        fail("{} differs between layers ({} and {}); tandem's {} takes one value", md_.where(key(suffix)),
             (*v)[0].get<int64_t>(), x.get<int64_t>(), arch_);
    return (*v)[0].get<int64_t>();
  }
  std::optional<double> number(std::string_view suffix) const {
    std::string k = key(suffix);
    auto v = md_.get_float(k);
    if (v && !std::isfinite(*v)) fail("{} is {}, not a finite number", md_.where(k), *v);
    return v;
  }

 private:
  const GgufMetadata& md_;
  std::string arch_;
};

// RoPE: θ, rotary dims, and rope.scaling.* as config.json's rope_parameters.
json rope_parameters(const ArchKeys& a, double theta, int64_t context) {
  json p = {{"rope_type", "default"}, {"rope_theta", theta}};
  std::string type(a.md().get_string(a.key("rope.scaling.type")).value_or("none"));
  auto factor = a.number("rope.scaling.factor");
  if (!factor) factor = a.number("rope.scale_linear");
  if (type == "none" || (type == "linear" && (!factor || *factor == 1.0))) return p;
  if (type == "longrope")
    fail("{} is longrope, which tandem does not implement", a.md().where(a.key("rope.scaling.type")));
  if (type != "linear" && type != "yarn")
    fail("{} is '{}' (tandem reads none, linear and yarn)", a.md().where(a.key("rope.scaling.type")), type);
  if (!factor || !(*factor > 0))
    fail("{}: rope scaling '{}' needs a positive {}", a.md().source(), type, a.key("rope.scaling.factor"));
  p["rope_type"] = type;
  p["factor"] = *factor;
  if (type == "yarn") {
    p["original_max_position_embeddings"] =
        a.count("rope.scaling.original_context_length").value_or(context);
    if (auto v = a.number("rope.scaling.yarn_beta_fast")) p["beta_fast"] = *v;
    if (auto v = a.number("rope.scaling.yarn_beta_slow")) p["beta_slow"] = *v;
    if (auto v = a.number("rope.scaling.yarn_attn_factor")) p["attention_factor"] = *v;
    for (const char* k : {"rope.scaling.yarn_log_multiplier", "rope.scaling.yarn_ext_factor"})
      if (auto v = a.number(k); v && *v != (std::string(k).ends_with("ext_factor") ? 1.0 : 0.0))
        fail("{} is {}, which tandem's YaRN does not implement", a.md().where(a.key(k)), *v);
  }
  return p;
}

// The ids that end generation: eos, eot, eom, and the tokens llama.cpp treats as end of
// generation by their text (a chat turn's end: <|im_end|>, <|eot_id|>, <end_of_turn>, ...).
json eos_ids(const GgufMetadata& md, int64_t vocab) {
  std::vector<int64_t> ids;
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                        "tokenizer.ggml.eom_token_id"})
    if (auto id = md.get_int(k); id && *id >= 0 && *id < vocab) ids.push_back(*id);
  if (const GgufValue* tokens = md.find("tokenizer.ggml.tokens")) {
    static const std::string_view kEnds[] = {"<|eot_id|>",   "<|eom_id|>",      "<|im_end|>",
                                             "<|end|>",      "<end_of_turn>",   "<|endoftext|>",
                                             "<|end_of_text|>", "<EOT>"};
    std::vector<std::string_view> text = tokens->as_strings(md.where("tokenizer.ggml.tokens"));
    for (size_t id = 0; id < text.size() && int64_t(id) < vocab; id++)
      if (std::find(std::begin(kEnds), std::end(kEnds), text[id]) != std::end(kEnds))
        ids.push_back(int64_t(id));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// Gemma's sliding layers: ggml's pattern n makes layer i sliding when i % n < n − 1.
json sliding_layer_types(const ArchKeys& a, int64_t layers, int64_t default_period) {
  int64_t period = a.count("attention.sliding_window_pattern", 1).value_or(default_period);
  json types = json::array();
  for (int64_t i = 0; i < layers; i++)
    types.push_back(i % period < period - 1 ? "sliding_attention" : "full_attention");
  return types;
}

// Gemma 2 / 3 (gemma_pytorch's rule, as llama.cpp applies it): the 27B models scale queries
// by hidden / heads, every other size by head_dim. ggml knows them by their layer count.
void add_gemma(json& c, const ArchKeys& a, int64_t layers, bool gemma3) {
  c["hidden_activation"] = "gelu_pytorch_tanh";
  const int64_t hidden = c["hidden_size"], heads = c["num_attention_heads"], head_dim = c["head_dim"];
  c["query_pre_attn_scalar"] = layers == (gemma3 ? 62 : 46) ? hidden / heads : head_dim;
  if (auto v = a.number("final_logit_softcapping")) c["final_logit_softcapping"] = *v;
  if (!gemma3) {
    if (auto v = a.number("attn_logit_softcapping")) c["attn_logit_softcapping"] = *v;
    c["sliding_window"] = a.count("attention.sliding_window").value_or(4096);
    c["layer_types"] = sliding_layer_types(a, layers, 2);
    json full = c["rope_parameters"];
    json sliding = full;
    if (auto swa = a.number("rope.freq_base_swa")) sliding["rope_theta"] = *swa;
    c["rope_parameters"] = {{"full_attention", full}, {"sliding_attention", sliding}};
    return;
  }
  const int64_t window = a.count("attention.sliding_window", 0).value_or(0);
  json full = c["rope_parameters"];
  json sliding = {{"rope_type", "default"},
                  {"rope_theta", a.number("rope.freq_base_swa").value_or(10000.0)}};
  c["rope_parameters"] = {{"full_attention", full}, {"sliding_attention", sliding}};
  if (window > 0) {
    c["sliding_window"] = window;
    c["layer_types"] = sliding_layer_types(a, layers, 6);
  } else {
    c["layer_types"] = json(std::vector<std::string>(size_t(layers), "full_attention"));
  }
}

void add_experts(json& c, const ArchKeys& a, const std::string& model_type) {
  const int64_t experts = a.require_count("expert_count");
  c["num_experts"] = experts;
  c["num_local_experts"] = experts;
  c["num_experts_per_tok"] = a.require_count("expert_used_count");
  if (model_type == "qwen3_moe") {
    c["moe_intermediate_size"] = a.require_count("expert_feed_forward_length");
    c["norm_topk_prob"] = a.md().get_bool(a.key("expert_weights_norm")).value_or(true);
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = json::array();
  }
}

// Widths and counts: hidden, heads, KV heads, head size, the MLP's width, the norm's ε.
void add_shape(json& c, const ArchKeys& a, int64_t layers) {
  const GgufMetadata& md = a.md();
  c["hidden_size"] = a.require_count("embedding_length");
  const int64_t heads = a.uniform_count("attention.head_count", layers).value_or(0);
  if (heads == 0) fail("{}: required metadata '{}' is missing", md.source(), a.key("attention.head_count"));
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = a.uniform_count("attention.head_count_kv", layers).value_or(heads);
  auto key_length = a.count("attention.key_length");
  auto value_length = a.count("attention.value_length");
  if (key_length && value_length && *key_length != *value_length)
    fail("{}: key_length {} differs from value_length {}; tandem's attention takes one head size",
         md.source(), *key_length, *value_length);
  const int64_t hidden = c["hidden_size"];
  c["head_dim"] = key_length.value_or(value_length.value_or(hidden / heads));
  if (auto ff = a.layer_counts("feed_forward_length", layers, 0)) c["intermediate_size"] = *ff;
  auto eps = a.number("attention.layer_norm_rms_epsilon");
  if (!eps) fail("{}: required metadata '{}' is missing", md.source(), a.key("attention.layer_norm_rms_epsilon"));
  c["rms_norm_eps"] = *eps;
}

// θ, scaling and the rotated part of each head (the llama architecture rotates whole heads).
void add_rope(json& c, const ArchKeys& a, const std::string& model_type, int64_t context) {
  c["rope_parameters"] = rope_parameters(a, a.number("rope.freq_base").value_or(10000.0), context);
  const int64_t head_dim = c["head_dim"];
  if (auto rot = a.count("rope.dimension_count"); rot && *rot != head_dim) {
    if (model_type == "llama" || model_type == "mixtral")
      fail("{} is {}, but the llama architecture rotates whole heads of {}",
           a.md().where(a.key("rope.dimension_count")), *rot, head_dim);
    c["rope_parameters"]["partial_rotary_factor"] = double(*rot) / double(head_dim);
  }
}

}  // namespace

std::string gguf_model_type(const GgufModel& model) {
  const GgufMetadata& md = model.metadata();
  const std::string arch(md.require_string("general.architecture"));
  for (const GgufArch& e : kGgufArchitectures) {
    if (arch != e.gguf_name) continue;
    if (arch == "llama" && md.get_int("llama.expert_count").value_or(0) > 0) return "mixtral";
    return e.model_type;
  }
  std::string known;
  for (const GgufArch& e : kGgufArchitectures) known += (known.empty() ? "" : ", ") + std::string(e.gguf_name);
  fail("{}: general.architecture '{}' is not one tandem serves from GGUF (it serves {})",
       md.source(), arch, known);
}

int64_t gguf_tensor_blocks(const GgufModel& model) {
  int64_t blocks = 0;
  for (std::string_view name : model.tensor_names()) {
    if (!name.starts_with("blk.")) continue;
    int64_t n = 0;
    auto [end, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), n);
    if (ec == std::errc() && end < name.data() + name.size() && *end == '.' && n >= 0)
      blocks = std::max(blocks, n + 1);
  }
  return blocks;
}

GgufTranslation translate_gguf(const GgufModel& model) {
  const GgufMetadata& md = model.metadata();
  const std::string model_type = gguf_model_type(model);
  const ArchKeys a(md, std::string(md.require_string("general.architecture")));
  // The layer count sizes everything per layer: it must match the tensors first.
  const int64_t layers = a.require_count("block_count");
  const int64_t held = gguf_tensor_blocks(model);
  if (layers != held)
    fail("{} is {}, but the file holds tensors for {} blocks", md.where(a.key("block_count")),
         layers, held);
  const GgufModel::TensorRef* embd = model.find("token_embd.weight");
  if (!embd || embd->info->shape.ndim != 2)
    fail("{}: tensor 'token_embd.weight' is missing or not a matrix", md.source());
  const int64_t vocab = embd->info->shape[0];
  if (auto v = a.count("vocab_size"); v && *v != vocab)
    fail("{} is {}, but token_embd.weight has {} rows", md.where(a.key("vocab_size")), *v, vocab);

  json c = {{"model_type", model_type}, {"num_hidden_layers", layers}, {"vocab_size", vocab}};
  add_shape(c, a, layers);
  const int64_t context = a.require_count("context_length");
  c["max_position_embeddings"] = context;
  c["tie_word_embeddings"] = model.find("output.weight") == nullptr;
  add_rope(c, a, model_type, context);
  c["eos_token_id"] = eos_ids(md, vocab);
  if (auto bos = md.get_int("tokenizer.ggml.bos_token_id"); bos && *bos >= 0 && *bos < vocab)
    c["bos_token_id"] = *bos;
  if (model_type == "mixtral" || model_type == "qwen3_moe") add_experts(c, a, model_type);
  if (model_type == "gemma2" || model_type == "gemma3_text") add_gemma(c, a, layers, model_type == "gemma3_text");
  if (model_type == "phi3")
    if (auto w = a.count("attention.sliding_window", 0); w && *w > 0) c["sliding_window"] = *w;

  GgufTranslation t;
  t.config = std::move(c);
  if (model.find("rope_freqs.weight")) {
    Tensor f = model.tensor("rope_freqs.weight");
    if (f.dtype != DType::F32 || f.ndim() != 1)
      fail("{}: tensor 'rope_freqs.weight' is {} {}, expected an f32 vector", md.source(),
           dtype_name(f.dtype), f.shape.str());
    t.rope_freq_divisors.assign(f.ptr<float>(), f.ptr<float>() + f.numel());
  }
  t.aliases = gguf_tensor_aliases(model, t.config);
  return t;
}

}  // namespace tandem
