#include "cli/random_model_gemma3.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <vector>

#include "core/error.h"
#include "loader/random_fill.h"
#include "model/vision/siglip.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

using json = nlohmann::json;

struct Gemma3TextShape {
  int hidden, layers, heads, kv_heads, head_dim, ffn, vocab, sliding_window;
  double query_pre_attn_scalar;
  int max_positions = 131072;
};
struct SiglipShape {
  int hidden, layers, heads, ffn, image, patch;
};
struct ImageTokenIds {
  int boi, eoi, image;
};

// The config.json of a Gemma3ForConditionalGeneration as the Hub's gemma-3-*-it folders
// hold it (rope_scaling linear ×8 on the global layers, rope_local_base_freq on the sliding
// ones, 5 sliding : 1 global), with the fields the Hub leaves to Gemma3TextConfig's
// defaults written out. <start_of_turn>/<end_of_turn> follow <end_of_image> (random
// tokenizer; the Hub's are 105/106), so eos is [1, <end_of_turn>].
json gemma3_config(const Gemma3TextShape& t, const SiglipShape& v, ImageTokenIds ids,
                   int mm_tokens) {
  const int end_of_turn = ids.eoi + 2;
  json text = {{"model_type", "gemma3_text"},
               {"vocab_size", t.vocab},
               {"hidden_size", t.hidden},
               {"intermediate_size", t.ffn},
               {"num_hidden_layers", t.layers},
               {"num_attention_heads", t.heads},
               {"num_key_value_heads", t.kv_heads},
               {"head_dim", t.head_dim},
               {"query_pre_attn_scalar", t.query_pre_attn_scalar},
               {"hidden_activation", "gelu_pytorch_tanh"},
               {"rms_norm_eps", 1e-6},
               {"max_position_embeddings", t.max_positions},
               {"sliding_window", t.sliding_window},
               {"sliding_window_pattern", 6},
               {"rope_theta", 1000000.0},
               {"rope_local_base_freq", 10000.0},
               {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}},
               {"attention_bias", false},
               {"final_logit_softcapping", nullptr},
               {"attn_logit_softcapping", nullptr}};
  json vision = {{"model_type", "siglip_vision_model"},
                 {"hidden_size", v.hidden},
                 {"intermediate_size", v.ffn},
                 {"num_hidden_layers", v.layers},
                 {"num_attention_heads", v.heads},
                 {"image_size", v.image},
                 {"patch_size", v.patch},
                 {"num_channels", 3},
                 {"hidden_act", "gelu_pytorch_tanh"},
                 {"layer_norm_eps", 1e-6},
                 {"vision_use_head", false}};
  return {{"architectures", {"Gemma3ForConditionalGeneration"}},
          {"model_type", "gemma3"},
          {"boi_token_index", ids.boi},
          {"eoi_token_index", ids.eoi},
          {"image_token_index", ids.image},
          {"mm_tokens_per_image", mm_tokens},
          {"eos_token_id", {1, end_of_turn}},
          {"initializer_range", 0.02},
          {"torch_dtype", "bfloat16"},
          {"text_config", text},
          {"vision_config", vision}};
}

// SigLIP so400m/14 at 896: what every gemma-3-*-it above 1b carries.
constexpr SiglipShape kSo400m{1152, 27, 16, 4304, 896, 14};
constexpr ImageTokenIds kHubImageIds{255999, 256000, 262144};

// Gemma 3's chat template (the Hub's, image items as <start_of_image>, the system prompt
// folded into the first user turn, assistant spelled "model").
constexpr const char* kGemma3ChatTemplate = R"({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)";

void write_json_file(const std::filesystem::path& p, const json& j) {
  std::ofstream out(p);
  out << j.dump(2) << "\n";
  if (!out) fail("{}: write failed", p.string());
}

json added_token(int id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// byte_level_tokenizer_json's BPE below the lowest high special id, its three specials
// renamed to Gemma's <pad>/<eos>/<bos>, then every id up to vocab_size: a special at the
// ids `specials` names, <unusedN> elsewhere (Gemma's vocabulary has such fillers too).
std::string gemma3_tokenizer_json(int vocab_size, const std::map<int, std::string>& specials) {
  const int base = specials.begin()->first;
  if (base < 259 || specials.rbegin()->first >= vocab_size)
    fail("random-model: image/turn token ids {}..{} must lie in [259, vocab_size {})", base,
         specials.rbegin()->first, vocab_size);
  json t = json::parse(byte_level_tokenizer_json(base));
  const char* renamed[] = {"<pad>", "<eos>", "<bos>"};
  json& vocab = t["model"]["vocab"];
  for (int id = 0; id < 3; id++) {
    json& a = t["added_tokens"][size_t(id)];
    vocab.erase(a["content"].get<std::string>());
    vocab[renamed[id]] = id;
    a["content"] = renamed[id];
  }
  int unused = 0;
  for (int id = base; id < vocab_size; id++) {
    auto it = specials.find(id);
    t["added_tokens"].push_back(
        added_token(id, it != specials.end() ? it->second : fmt::format("<unused{}>", unused++)));
  }
  return t.dump();
}

}  // namespace

std::optional<json> gemma3_preset(const std::string& name) {
  // From the Hub's config.json files (text sizes; the rest Gemma3TextConfig's defaults).
  if (name == "gemma-3-12b")
    return gemma3_config({3840, 48, 16, 8, 256, 15360, 262208, 1024, 256}, kSo400m, kHubImageIds,
                         256);
  if (name == "gemma-3-4b")
    return gemma3_config({2560, 34, 8, 4, 256, 10240, 262208, 1024, 256}, kSo400m, kHubImageIds,
                         256);
  if (name == "gemma-3-vision-tiny")
    // 6 layers of 64 (5 sliding, window 64), a 2-layer SigLIP of 32 on 64×64 images in
    // patches of 8, pooled to 16 soft tokens.
    return gemma3_config({64, 6, 4, 2, 16, 128, 524, 64, 16, 4096}, {32, 2, 2, 64, 64, 8},
                         {517, 518, 521}, 16);
  return std::nullopt;
}

void add_gemma3_tensors(SafetensorsWriter& w, const ModelConfig& c, DType dtype, uint64_t seed) {
  const SiglipConfig vc = parse_siglip_config(c);
  const int64_t D = c.hidden_size, V = c.vocab_size, Dh = c.head_dim, Hq = c.num_heads,
                Hkv = c.num_kv_heads, F = c.intermediate_size;
  const int64_t Dv = vc.hidden_size, Fv = vc.intermediate_size, Lv = vc.num_layers,
                p = vc.patch_size, side = vc.patches_per_side();
  uint64_t counter = seed * 1000003;
  auto normal = [&](std::string name, std::vector<int64_t> shape, int64_t fan_in) {
    float std = float(1.0 / std::sqrt(double(fan_in)));
    w.add_chunked(std::move(name), dtype, std::move(shape),
                  random_chunk_fill(dtype, counter++, std));
  };
  auto constant = [&](std::string name, int64_t n, float value) {
    w.add(std::move(name), dtype, {n}, [=](void* dst, size_t) {
      std::vector<float> v(size_t(n), value);
      convert_from_f32(v.data(), dst, dtype, size_t(n));
    });
  };
  const std::string T = "language_model.model.";
  normal(T + "embed_tokens.weight", {V, D}, D);
  constant(T + "norm.weight", D, 0.f);
  for (int i = 0; i < c.num_layers; i++) {
    const std::string L = fmt::format("{}layers.{}.", T, i), A = L + "self_attn.";
    for (const char* n : {"input_layernorm", "post_attention_layernorm",
                          "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      constant(L + n + ".weight", D, 0.f);
    normal(A + "q_proj.weight", {Hq * Dh, D}, D);
    normal(A + "k_proj.weight", {Hkv * Dh, D}, D);
    normal(A + "v_proj.weight", {Hkv * Dh, D}, D);
    normal(A + "o_proj.weight", {D, Hq * Dh}, Hq * Dh);
    constant(A + "q_norm.weight", Dh, 0.f);
    constant(A + "k_norm.weight", Dh, 0.f);
    normal(L + "mlp.gate_proj.weight", {F, D}, D);
    normal(L + "mlp.up_proj.weight", {F, D}, D);
    normal(L + "mlp.down_proj.weight", {D, F}, F);
  }
  const std::string E = "vision_tower.vision_model.";
  normal(E + "embeddings.patch_embedding.weight", {Dv, 3, p, p}, 3 * p * p);
  constant(E + "embeddings.patch_embedding.bias", Dv, 0.f);
  normal(E + "embeddings.position_embedding.weight", {side * side, Dv}, Dv);
  auto layer_norm = [&](const std::string& name) {
    constant(name + ".weight", Dv, 1.f);
    constant(name + ".bias", Dv, 0.f);
  };
  for (int64_t i = 0; i < Lv; i++) {
    const std::string L = fmt::format("{}encoder.layers.{}.", E, i);
    layer_norm(L + "layer_norm1");
    for (const char* n : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      normal(L + "self_attn." + n + ".weight", {Dv, Dv}, Dv);
      constant(L + "self_attn." + n + ".bias", Dv, 0.f);
    }
    layer_norm(L + "layer_norm2");
    normal(L + "mlp.fc1.weight", {Fv, Dv}, Dv);
    constant(L + "mlp.fc1.bias", Fv, 0.f);
    normal(L + "mlp.fc2.weight", {Dv, Fv}, Fv);
    constant(L + "mlp.fc2.bias", Dv, 0.f);
  }
  layer_norm(E + "post_layernorm");
  // Stored [vision, text]: the soft tokens are x · W.
  normal("multi_modal_projector.mm_input_projection_weight", {Dv, D}, Dv);
  constant("multi_modal_projector.mm_soft_emb_norm.weight", Dv, 0.f);
}

void write_gemma3_side_files(const std::filesystem::path& dir, const ModelConfig& c) {
  const SiglipConfig vc = parse_siglip_config(c);
  const int boi = vc.boi_token_id, eoi = vc.eoi_token_id, image = vc.image_token_id;
  const int vocab = c.vocab_size;
  const int start_of_turn = eoi + 1, end_of_turn = eoi + 2;
  const std::map<int, std::string> specials = {{boi, "<start_of_image>"},
                                               {eoi, "<end_of_image>"},
                                               {start_of_turn, "<start_of_turn>"},
                                               {end_of_turn, "<end_of_turn>"},
                                               {image, "<image_soft_token>"}};
  if (specials.size() != 5) fail("random-model: the image and turn token ids collide");
  std::ofstream(dir / "tokenizer.json") << gemma3_tokenizer_json(vocab, specials);
  write_json_file(dir / "tokenizer_config.json", {{"bos_token", "<bos>"},
                                                  {"eos_token", "<eos>"},
                                                  {"pad_token", "<pad>"},
                                                  {"boi_token", "<start_of_image>"},
                                                  {"eoi_token", "<end_of_image>"},
                                                  {"image_token", "<image_soft_token>"},
                                                  {"processor_class", "Gemma3Processor"},
                                                  {"tokenizer_class", "GemmaTokenizer"}});
  std::ofstream(dir / "chat_template.jinja") << kGemma3ChatTemplate;
  write_json_file(dir / "generation_config.json", {{"bos_token_id", 2},
                                                   {"eos_token_id", {1, end_of_turn}},
                                                   {"pad_token_id", 0},
                                                   {"do_sample", false}});
  const int size = vc.image_size, seq = vc.mm_tokens_per_image;
  write_json_file(dir / "preprocessor_config.json",
                  {{"image_processor_type", "Gemma3ImageProcessor"},
                   {"processor_class", "Gemma3Processor"},
                   {"do_convert_rgb", nullptr},
                   {"do_normalize", true},
                   {"do_pan_and_scan", nullptr},
                   {"do_rescale", true},
                   {"do_resize", true},
                   {"image_mean", {0.5, 0.5, 0.5}},
                   {"image_std", {0.5, 0.5, 0.5}},
                   {"image_seq_length", seq},
                   {"resample", 2},
                   {"rescale_factor", 1.0 / 255.0},
                   {"size", {{"height", size}, {"width", size}}}});
  write_json_file(dir / "processor_config.json",
                  {{"image_seq_length", seq}, {"processor_class", "Gemma3Processor"}});
}

}  // namespace tandem::cli
