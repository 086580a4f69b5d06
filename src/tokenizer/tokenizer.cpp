#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer/unicode.h"

namespace tandem {
namespace {

using tok::TokenizerParts;

const tok::json& field_or_null(const tok::json& j, const char* key) {
  static const tok::json null_json;
  auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}

// Per-id tables for decoding: added tokens win over the model's vocabulary, as in HF.
void index_ids(TokenizerParts& p) {
  int32_t limit = p.model->id_limit();
  for (const tok::AddedToken& t : p.added.tokens()) limit = std::max(limit, t.id + 1);
  p.vocab_size = limit;
  p.decode_str.assign(limit, nullptr);
  p.special.assign(limit, false);
  for (int32_t id = 0; id < p.model->id_limit(); ++id) p.decode_str[id] = p.model->id_to_token(id);
  for (const tok::AddedToken& t : p.added.tokens()) {
    p.decode_str[t.id] = &t.decoded;
    p.special[t.id] = t.special;
  }
}

std::unique_ptr<TokenizerParts> build_parts(const tok::json& j, tok::BpeSource source,
                                            std::string_view origin) {
  tok::LoadContext ctx{std::string(origin), "tokenizer"};
  if (!j.is_object()) ctx.fail("expected a JSON object");
  auto p = std::make_unique<TokenizerParts>();
  p->origin = origin;
  p->normalizer = tok::make_normalizer(field_or_null(j, "normalizer"), ctx.with("normalizer"));
  p->pre_tokenizer =
      tok::make_pre_tokenizer(field_or_null(j, "pre_tokenizer"), ctx.with("pre_tokenizer"));
  const tok::json& model = tok::require_field(j, "model", ctx);
  p->model = source.has_vocab || source.has_merges
                 ? tok::BpeModel::build(model, std::move(source), ctx.with("model"))
                 : tok::BpeModel::from_json(model, ctx.with("model"));
  p->post_processor =
      tok::make_post_processor(field_or_null(j, "post_processor"), ctx.with("post_processor"));
  p->decoder = tok::make_decoder(field_or_null(j, "decoder"), ctx.with("decoder"));
  p->decoder->add_traits(p->decoder_traits);
  p->added = tok::AddedVocabulary(field_or_null(j, "added_tokens"), *p->model, p->normalizer.get(),
                                  ctx.with("added_tokens"));
  index_ids(*p);
  return p;
}

// One stretch of input between non-normalized added tokens: normalize, cut out normalized
// added tokens, pre-tokenize, and run the model on every piece.
void encode_stretch(const TokenizerParts& p, std::string_view text, bool at_origin,
                    bool split_special, std::vector<int32_t>& ids) {
  tok::NormalizedText normalized;
  std::string_view view = text;
  if (p.normalizer) {
    normalized.text = std::string(text);
    p.normalizer->normalize(normalized);
    view = normalized.text;
    at_origin = at_origin && normalized.starts_at_origin;
  }
  std::vector<tok::TextSection> sections;
  p.added.split(view, /*normalized_set=*/true, sections, split_special);
  auto to_model = [&](const tok::Piece& piece) { p.model->tokenize(piece.text, ids); };
  for (const tok::TextSection& s : sections) {
    if (s.token) {
      ids.push_back(s.token->id);
      continue;
    }
    tok::Piece piece{view.substr(s.begin, s.end - s.begin), at_origin && s.begin == 0};
    if (p.pre_tokenizer)
      p.pre_tokenizer->pre_tokenize(piece, tok::PieceSink(to_model));
    else
      to_model(piece);
  }
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TokenizerParts> parts) : parts_(std::move(parts)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::from_json_text(std::string_view json_text,
                                                           std::string_view origin) {
  tok::TokenizerJson file = tok::read_tokenizer_json(json_text, origin);
  try {
    return std::shared_ptr<const Tokenizer>(
        new Tokenizer(build_parts(file.doc, std::move(file.source), origin)));
  } catch (const tok::json::exception& e) {
    fail("{}: malformed tokenizer.json: {}", origin, e.what());
  }
}

std::shared_ptr<const Tokenizer> Tokenizer::from_components(const tok::json& doc,
                                                            tok::BpeSource source,
                                                            std::string_view origin) {
  try {
    return std::shared_ptr<const Tokenizer>(new Tokenizer(build_parts(doc, std::move(source), origin)));
  } catch (const tok::json::exception& e) {
    fail("{}: malformed tokenizer: {}", origin, e.what());
  }
}

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
  if (is_gguf_file(path)) return tokenizer_from_gguf(GgufFile::open(path)->metadata());
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(file)) file /= "tokenizer.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open tokenizer file", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  return from_json_text(text.str(), file.string());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       bool split_special_tokens) const {
  const TokenizerParts& p = *parts_;
  std::string repaired;
  if (!tok::is_valid_utf8(text)) {
    repaired = tok::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::TextSection> sections;
  p.added.split(text, /*normalized_set=*/false, sections, split_special_tokens);
  for (const tok::TextSection& s : sections) {
    if (s.token)
      ids.push_back(s.token->id);
    else
      encode_stretch(p, text.substr(s.begin, s.end - s.begin), s.begin == 0, split_special_tokens,
                     ids);
  }
  if (add_special_tokens && p.post_processor) p.post_processor->process(ids);
  return ids;
}

const std::string* Tokenizer::decode_token(int32_t id, bool skip_special_tokens) const {
  const TokenizerParts& p = *parts_;
  if (id < 0 || id >= p.vocab_size)
    fail("{}: token id {} is out of range [0, {})", p.origin, id, p.vocab_size);
  if (skip_special_tokens && p.special[id]) return nullptr;
  return p.decode_str[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids)
    if (const std::string* s = decode_token(id, skip_special_tokens)) tokens.push_back(*s);
  tok::DecodeContext ctx;
  parts_->decoder->decode_chain(tokens, ctx);
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

int Tokenizer::vocab_size() const {
  return parts_->vocab_size;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = parts_->added.id_of(token)) return id;
  return parts_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const tok::AddedToken* t = parts_->added.by_id(id)) return t->content;
  const std::string* s = parts_->model->id_to_token(id);
  return s ? *s : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < parts_->vocab_size && parts_->special[id];
}

}  // namespace tandem
