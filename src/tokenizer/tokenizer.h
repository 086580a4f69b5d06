// Tokenizers as Hugging Face `tokenizers` defines them in tokenizer.json, reproduced exactly:
// added tokens are cut out first, the rest is normalized, pre-tokenized and BPE-encoded, and
// the post-processor adds BOS & co. when asked. Decoding runs the file's decoder chain.
//
//   auto tok = Tokenizer::load("/models/qwen3");           // a dir or its tokenizer.json
//   std::vector<int32_t> ids = tok->encode("Hello", /*add_special_tokens=*/true);
//   std::string text = tok->decode(ids, /*skip_special_tokens=*/false);
//
// Choices where HF offers none:
// - encode takes bytes. Invalid UTF-8 (which a Python str cannot hold) is first replaced by
//   U+FFFD per maximal ill-formed subsequence.
// - decode and IncrementalDecoder::push throw tandem::Error for ids outside
//   [0, vocab_size()); ids inside that range that name no token are skipped, as HF skips them.
// - truncation/padding in tokenizer.json are ignored; BPE dropout is ignored.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

namespace tok {
struct TokenizerParts;
struct BpeSource;
}

class Tokenizer {
 public:
  // Loads tokenizer.json (a file path, or a directory holding tokenizer.json), or the
  // tokenizer a GGUF file carries in its metadata (tokenizer/gguf_tokenizer.h). Throws
  // tandem::Error naming the file and the component for anything unsupported or malformed.
  static std::shared_ptr<const Tokenizer> load(const std::filesystem::path& path);
  // From tokenizer.json's components: `doc` without model.vocab and model.merges, which
  // `source` holds (how a GGUF vocabulary is turned into the same pipeline).
  static std::shared_ptr<const Tokenizer> from_components(const nlohmann::json& doc,
                                                          tok::BpeSource source,
                                                          std::string_view origin);
  // The same from the text of a tokenizer.json; `origin` names it in errors.
  static std::shared_ptr<const Tokenizer> from_json_text(std::string_view json_text,
                                                         std::string_view origin = "<memory>");
  ~Tokenizer();

  // `split_special_tokens` (HF's flag of that name): the text of a special token is encoded
  // as ordinary text, never as the token; other added tokens still match. For text a client
  // wrote into a chat, which must not be able to write the template's control tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens,
                              bool split_special_tokens = false) const;  // thread-safe
  std::string decode(std::span<const int32_t> ids,
                     bool skip_special_tokens) const;  // HF decode exactly
  int vocab_size() const;                              // max id + 1 over vocab and added tokens
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // "" for unknown ids
  bool is_special(int32_t id) const;
  // The raw bytes each id adds to the output, [vocab_size()]: what the grammar module's
  // TokenVocab is built from (once per served model). Byte-level tokens give their bytes;
  // byte-fallback "<0xNN>" tokens their one byte; other tokens what the decoder chain makes
  // of them alone mid-sequence (Metaspace's "▁" is a space; the first token's leading-space
  // strip is not applied); special and added tokens their content; ids naming no token "".
  std::vector<std::string> token_bytes() const;

 private:
  friend class IncrementalDecoder;
  explicit Tokenizer(std::unique_ptr<tok::TokenizerParts> parts);
  // The string HF's decode starts from for one id: nullptr to skip it (no such token, or a
  // special token while skipping them). Throws for ids outside [0, vocab_size()).
  const std::string* decode_token(int32_t id, bool skip_special_tokens) const;

  std::unique_ptr<tok::TokenizerParts> parts_;
};

// Streaming detokenizer, one per sequence: emits text only when complete UTF-8, reproduces
// HF decode exactly once all tokens are in (incl. SentencePiece leading-space rules / Metaspace
// prepend handling, ByteFallback sequences), and holds back no more than needed.
//
// It decodes a short window of recent tokens: the window restarts at each point where HF's
// decode is known to split cleanly (a whole UTF-8 character, a finished <0xNN> run, text
// already past the leading-space rules). A run of <0xNN> byte tokens is held until it ends,
// because HF turns a whole run into U+FFFDs when any of it is invalid.
class IncrementalDecoder {
 public:
  IncrementalDecoder(std::shared_ptr<const Tokenizer> tok, bool skip_special_tokens);
  // push throws tandem::Error for ids outside [0, vocab_size()); after finish the decoder
  // starts a fresh sequence.
  std::string push(int32_t id);  // newly complete text (may be empty)
  std::string finish();          // whatever is still held back (invalid UTF-8 as U+FFFD, like HF)

 private:
  std::string decode_window(size_t num_tokens, bool at_end) const;
  size_t stable_length(const std::string& text) const;
  bool window_can_restart(size_t stable) const;

  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::vector<const std::string*> window_;  // token strings since the last clean split
  size_t emitted_ = 0;                      // bytes of the window's text already returned
  bool at_start_ = true;                    // the window begins at the sequence's first token
};

// tokenizer_config.json: bos/eos/pad/unk tokens (string or {"content": ...} object),
// chat_template (a string, or a list of {name, template}: keep all, expose the "default" one),
// add_bos_token/add_eos_token, and the whole json for extra template variables.
// A chat_template.jinja file beside it (newer transformers save the template there) is
// used when tokenizer_config.json has none.
struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<std::string> chat_template;            // the default template
  std::map<std::string, std::string> named_templates;  // e.g. "tool_use"
  std::optional<bool> add_bos_token, add_eos_token;
  // The whole tokenizer_config.json (for extra template variables): raw() is {} when unset.
  std::shared_ptr<const nlohmann::json> raw_json;
  const nlohmann::json& raw() const;
  // A folder's tokenizer_config.json (missing file -> empty config), or a GGUF file's
  // tokenizer metadata (tokenizer/gguf_tokenizer.h).
  static TokenizerConfig load(const std::filesystem::path& dir);
  static TokenizerConfig parse(const nlohmann::json& j, std::string_view origin);
};

// A byte-level BPE tokenizer.json (256 byte tokens, no merges beyond bytes is fine, plus ChatML
// special tokens <|im_start|>, <|im_end|>, <|endoftext|>) for random-weight benchmark models.
// Ids 0, 1, 2 are <|endoftext|>, <|im_start|>, <|im_end|> (the oracle models' layout, so
// eos_token_id 2 is <|im_end|>); 3..258 are the bytes; the rest of the vocabulary is filled
// with BPE merges of frequent English letters. Throws if vocab_size < 259.
std::string byte_level_tokenizer_json(int vocab_size);

}  // namespace tandem
