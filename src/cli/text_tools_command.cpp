// The text tools: `tandem tokenize`, `tandem detokenize`, `tandem chat-template`.
// They answer the first questions of anyone debugging a deployment with the same code
// the server uses (src/tokenizer, src/template), never a second implementation.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "core/error.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// --model (a folder holding tokenizer.json, or a GGUF file) or --tokenizer DIR.
std::filesystem::path tokenizer_dir(const TextToolOptions& o) {
  if (o.model && o.tokenizer) fail("give only one of --model and --tokenizer");
  if (o.model) return *o.model;
  if (o.tokenizer) return *o.tokenizer;
  fail("give --model DIR|FILE.gguf or --tokenizer DIR");
}

template <typename Fn>
int guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int run_tokenize(const TextToolOptions& o) {
  return guarded([&] {
    if (o.text.has_value() == o.file.has_value()) fail("give exactly one of --text and --file");
    auto tok = Tokenizer::load(tokenizer_dir(o));
    std::string text = o.text ? *o.text : read_file(*o.file);
    fmt::print("{}\n", nlohmann::json(tok->encode(text, o.add_special)).dump());
    return 0;
  });
}

int run_detokenize(const TextToolOptions& o) {
  return guarded([&] {
    if (!o.ids) fail("--ids is required");
    auto tok = Tokenizer::load(tokenizer_dir(o));
    std::vector<int32_t> ids = parse_ids(*o.ids);
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size())
        fail("token id {} is outside the vocabulary (0..{})", id, tok->vocab_size() - 1);
    std::string text = tok->decode(ids, o.skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  });
}

int run_chat_template(const TextToolOptions& o) {
  return guarded([&] {
    if (!o.context) fail("--context FILE.json is required");
    int sources = int(o.model.has_value()) + int(o.tokenizer.has_value()) + int(o.template_file.has_value());
    if (sources != 1) fail("give exactly one of --model, --tokenizer and --template");
    nlohmann::ordered_json context = nlohmann::ordered_json::parse(read_file(*o.context), nullptr, false);
    if (!context.is_object()) fail("{}: must hold a JSON object of template variables", *o.context);
    std::string source;
    if (o.template_file) {
      source = read_file(*o.template_file);
    } else {
      TokenizerConfig config = TokenizerConfig::load(tokenizer_dir(o));
      if (!config.chat_template) fail("{}: no chat template (tokenizer_config.json or the GGUF file's tokenizer.chat_template)", tokenizer_dir(o).string());
      source = *config.chat_template;
      // Variables the context leaves out default to the tokenizer's special tokens.
      auto fill = [&](const char* key, const std::optional<std::string>& v) {
        if (v && !context.contains(key)) context[key] = *v;
      };
      fill("bos_token", config.bos_token);
      fill("eos_token", config.eos_token);
      fill("unk_token", config.unk_token);
      fill("pad_token", config.pad_token);
    }
    jinja::RenderOptions options;
    options.now = o.now;
    std::string text = jinja::Template::parse(source).render(context, options);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  });
}

}  // namespace tandem::cli
