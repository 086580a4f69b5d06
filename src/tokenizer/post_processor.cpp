#include "tokenizer/post_processor.h"

#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace tandem::tok {
namespace {

// The single-sequence layout as a list of parts: special-token ids, or the sequence itself.
struct TemplatePart {
  bool is_sequence;
  std::vector<int32_t> ids;  // for special tokens
};

class TemplateProcessor final : public PostProcessor {
 public:
  explicit TemplateProcessor(std::vector<TemplatePart> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const TemplatePart& p : parts_) {
      if (p.is_sequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), p.ids.begin(), p.ids.end());
    }
    ids = std::move(out);
  }

 private:
  std::vector<TemplatePart> parts_;
};

class NoOpProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&) const override {}
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& s : steps_) s->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

using SpecialIds = std::map<std::string, std::vector<int32_t>>;

SpecialIds parse_special_tokens(const json& j, const LoadContext& ctx) {
  SpecialIds out;
  auto it = j.find("special_tokens");
  if (it == j.end() || it->is_null()) return out;
  for (const auto& [name, value] : it->items()) {
    const json& ids = require_field(value, "ids", ctx);
    if (!ids.is_array()) ctx.fail("special_tokens['{}'].ids must be an array", name);
    for (const json& id : ids) out[name].push_back(id.get<int32_t>());
  }
  return out;
}

// One template piece: {"SpecialToken": {"id": name}}, {"Sequence": {"id": "A"}}, or the
// string spelling "$A", "$A:0", "[CLS]", "[CLS]:0". Sequence B (pairs only) gives nullopt.
std::optional<TemplatePart> parse_piece(const json& piece, const SpecialIds& specials,
                                        const LoadContext& ctx) {
  std::string name;
  bool is_sequence;
  if (piece.is_string()) {
    name = piece.get<std::string>();
    if (size_t colon = name.rfind(':'); colon != std::string::npos && colon > 0)
      name = name.substr(0, colon);
    is_sequence = name.starts_with("$");
    if (is_sequence) name = name.substr(1);
  } else if (piece.is_object() && piece.contains("Sequence")) {
    is_sequence = true;
    name = require_string(piece["Sequence"], "id", ctx);
  } else if (piece.is_object() && piece.contains("SpecialToken")) {
    is_sequence = false;
    name = require_string(piece["SpecialToken"], "id", ctx);
  } else {
    ctx.fail("unknown template piece {}", piece.dump());
  }
  if (is_sequence) {
    if (name.empty() || name == "A" || name == "a" || name == "0") return TemplatePart{true, {}};
    return std::nullopt;
  }
  auto it = specials.find(name);
  if (it == specials.end()) ctx.fail("template uses special token '{}' without ids", name);
  return TemplatePart{false, it->second};
}

std::unique_ptr<PostProcessor> make_template(const json& j, const LoadContext& ctx) {
  SpecialIds specials = parse_special_tokens(j, ctx);
  json single = require_field(j, "single", ctx);
  if (single.is_string()) {  // "[CLS] $A [SEP]"
    std::istringstream words(single.get<std::string>());
    json list = json::array();
    for (std::string w; words >> w;) list.push_back(w);
    single = list;
  }
  if (!single.is_array()) ctx.fail("\"single\" must be an array or a string");
  std::vector<TemplatePart> parts;
  for (const json& piece : single)
    if (auto part = parse_piece(piece, specials, ctx)) parts.push_back(std::move(*part));
  return std::make_unique<TemplateProcessor>(std::move(parts));
}

// BertProcessing / RobertaProcessing: {"cls": [token, id], "sep": [token, id]}.
std::unique_ptr<PostProcessor> make_cls_sep(const json& j, const LoadContext& ctx) {
  auto id_of = [&](const char* key) {
    const json& v = require_field(j, key, ctx);
    if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer())
      ctx.fail("\"{}\" must be [token, id]", key);
    return v[1].get<int32_t>();
  };
  std::vector<TemplatePart> parts = {{false, {id_of("cls")}}, {true, {}}, {false, {id_of("sep")}}};
  return std::make_unique<TemplateProcessor>(std::move(parts));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const json& j, const LoadContext& ctx) {
  if (j.is_null()) return nullptr;
  std::string type = component_type(j, ctx);
  if (type == "TemplateProcessing") return make_template(j, ctx);
  if (type == "BertProcessing" || type == "RobertaProcessing") return make_cls_sep(j, ctx);
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();
  if (type == "Sequence") {
    const json& list = require_field(j, "processors", ctx);
    if (!list.is_array()) ctx.fail("\"processors\" must be an array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const json& item : list)
      if (auto step = make_post_processor(item, ctx)) steps.push_back(std::move(step));
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  ctx.fail(
      "unknown type '{}' (supported: TemplateProcessing, BertProcessing, "
      "RobertaProcessing, ByteLevel, Sequence)",
      type);
}

}  // namespace tandem::tok
