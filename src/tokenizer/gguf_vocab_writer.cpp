#include "tokenizer/gguf_vocab_writer.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

using json = nlohmann::json;
using tok::GgufTokenType;

// llama.cpp's name for the pre-tokenizer of a byte-level BPE tokenizer.json: the GPT-2 split
// (ByteLevel's own regex), or the Llama 3 / Qwen2 Split before a regex-less ByteLevel.
std::string pre_name(const json& pre, const std::string& origin) {
  auto is_byte_level = [](const json& p, bool use_regex) {
    return p.is_object() && p.value("type", "") == "ByteLevel" &&
           p.value("use_regex", true) == use_regex;
  };
  if (is_byte_level(pre, true)) return "gpt-2";
  if (pre.is_object() && pre.value("type", "") == "Sequence") {
    const json& steps = pre.value("pretokenizers", json::array());
    if (steps.size() == 2 && is_byte_level(steps[1], false) &&
        steps[0].value("type", "") == "Split") {
      const std::string regex = steps[0].value("pattern", json::object()).value("Regex", "");
      if (regex == tok::kLlama3Split) return "llama-bpe";
      if (regex == tok::kQwen2Split) return "qwen2";
    }
  }
  fail(
      "{}: the pre_tokenizer {} is none llama.cpp names (GGUF files are written for the GPT-2, "
      "Llama 3 and Qwen2 byte-level splits)",
      origin, pre.dump().substr(0, 200));
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
};

// Tokens by id: the model's vocabulary, then the added tokens over it, the gaps and the ids
// up to vocab_size as UNUSED "[PADi]" (convert_hf_to_gguf.py's padding).
Vocab vocab_by_id(const json& doc, int64_t vocab_size, const std::string& origin) {
  const json& v = doc["model"]["vocab"];
  int64_t n = vocab_size;
  for (const auto& [token, id] : v.items()) n = std::max<int64_t>(n, id.get<int64_t>() + 1);
  for (const json& a : doc.value("added_tokens", json::array()))
    n = std::max<int64_t>(n, a["id"].get<int64_t>() + 1);
  if (n > (int64_t(1) << 24)) fail("{}: token ids up to {} (more than 2^24)", origin, n);
  Vocab out{std::vector<std::string>(size_t(n)),
            std::vector<int32_t>(size_t(n), int32_t(GgufTokenType::Unused))};
  auto put = [&](int64_t id, const std::string& token, GgufTokenType type) {
    if (id < 0) fail("{}: token '{}' has the negative id {}", origin, token, id);
    out.tokens[size_t(id)] = token;
    out.types[size_t(id)] = int32_t(type);
  };
  for (const auto& [token, id] : v.items()) put(id.get<int64_t>(), token, GgufTokenType::Normal);
  for (const json& a : doc.value("added_tokens", json::array()))
    put(a["id"].get<int64_t>(), a["content"].get<std::string>(),
        a.value("special", false) ? GgufTokenType::Control : GgufTokenType::UserDefined);
  for (size_t i = 0; i < out.tokens.size(); i++)
    if (out.types[i] == int32_t(GgufTokenType::Unused))
      out.tokens[i] = "[PAD" + std::to_string(i) + "]";
  return out;
}

std::vector<std::string> merges_of(const json& model) {
  std::vector<std::string> out;
  for (const json& m : model.value("merges", json::array()))
    out.push_back(m.is_string() ? m.get<std::string>()
                                : m[0].get<std::string>() + " " + m[1].get<std::string>());
  return out;
}

// The id of a special token named in tokenizer_config.json, else config.json's `key`.
std::optional<int32_t> special_id(const std::optional<std::string>& token, const Vocab& v,
                                  const json& config, const char* key) {
  if (token)
    for (size_t i = 0; i < v.tokens.size(); i++)
      if (v.tokens[i] == *token) return int32_t(i);
  const json id = config.value(key, json());
  if (id.is_number_integer()) return id.get<int32_t>();
  if (id.is_array() && !id.empty() && id[0].is_number_integer()) return id[0].get<int32_t>();
  return std::nullopt;
}

// Whether a post-processor puts a special token first (Llama 3's BOS), also inside a Sequence
// (Llama 3.1's: ByteLevel, then TemplateProcessing).
bool processor_adds_bos(const json& p) {
  if (!p.is_object()) return false;
  if (p.value("type", "") == "Sequence") {
    const json& list = p.value("processors", json::array());
    return std::any_of(list.begin(), list.end(),
                       [](const json& q) { return processor_adds_bos(q); });
  }
  if (p.value("type", "") != "TemplateProcessing") return false;
  const json& single = p.value("single", json::array());
  return single.is_array() && !single.empty() && single[0].contains("SpecialToken");
}

bool post_processor_adds_bos(const json& doc) {
  return processor_adds_bos(doc.value("post_processor", json()));
}

}  // namespace

void add_gguf_vocab(GgufWriter& w, const std::filesystem::path& dir, const json& config) {
  const std::string origin = (dir / "tokenizer.json").string();
  std::ifstream in(dir / "tokenizer.json");
  if (!in) fail("{}: not found (a GGUF file needs the model's tokenizer)", origin);
  const json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.contains("model")) fail("{}: not a tokenizer.json", origin);
  const json& model = doc["model"];
  const std::string type = model.value("type", "");
  if (type != "BPE" || model.value("byte_fallback", false) ||
      !doc.value("decoder", json()).is_object() || doc["decoder"].value("type", "") != "ByteLevel")
    fail("{}: a {} model{}; GGUF files are written for byte-level BPE vocabularies (gpt2)", origin,
         type.empty() ? "typeless" : type,
         model.value("byte_fallback", false) ? " with byte fallback" : "");
  const Vocab v = vocab_by_id(doc, config.value("vocab_size", int64_t(0)), origin);
  const TokenizerConfig tc = TokenizerConfig::load(dir);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre_name(doc.value("pre_tokenizer", json()), origin));
  w.add_strings("tokenizer.ggml.tokens", v.tokens);
  w.add_i32s("tokenizer.ggml.token_type", v.types);
  w.add_strings("tokenizer.ggml.merges", merges_of(model));
  auto id = [&](const char* key, std::optional<int32_t> id) {
    if (id && *id >= 0 && size_t(*id) < v.tokens.size()) w.add_u32(key, uint32_t(*id));
  };
  id("tokenizer.ggml.bos_token_id", special_id(tc.bos_token, v, config, "bos_token_id"));
  id("tokenizer.ggml.eos_token_id", special_id(tc.eos_token, v, config, "eos_token_id"));
  id("tokenizer.ggml.padding_token_id", special_id(tc.pad_token, v, config, "pad_token_id"));
  w.add_bool("tokenizer.ggml.add_bos_token",
             tc.add_bos_token.value_or(post_processor_adds_bos(doc)));
  w.add_bool("tokenizer.ggml.add_eos_token", tc.add_eos_token.value_or(false));
  if (tc.chat_template) w.add_string("tokenizer.chat_template", *tc.chat_template);
  for (const auto& [name, text] : tc.named_templates)
    if (name != "default") w.add_string("tokenizer.chat_template." + name, text);
}

}  // namespace tandem
