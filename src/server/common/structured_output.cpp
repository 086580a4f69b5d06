#include "server/common/structured_output.h"

#include "server/common/api_error.h"
#include "server/common/bounded_json.h"

namespace tandem::server {
namespace {

using grammar::GrammarSpec;
using grammar::JsonOptions;

JsonOptions json_options(bool strict) {
  JsonOptions o;
  o.strict_properties = strict;
  o.strict_items = strict;
  return o;
}

const Json& require_object(const FieldReader& f, const char* key) {
  const Json* j = f.object_field(key);
  if (!j) invalid_request(f.name(key), "'{}' is required", f.name(key));
  return *j;
}

// A tool's parameters move under the call object, so its own "#/..." references are
// re-rooted at their new place.
void reroot_refs(Json& schema, const std::string& root) {
  if (schema.is_object()) {
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      if (it.key() == "$ref" && it->is_string()) {
        const std::string& ref = it->get_ref<const std::string&>();
        if (!ref.empty() && ref[0] == '#') *it = "#" + root + ref.substr(1);
      } else {
        reroot_refs(*it, root);
      }
    }
  } else if (schema.is_array()) {
    for (Json& item : schema) reroot_refs(item, root);
  }
}

// {"name": <const>, "arguments" | "parameters": <the tool's schema>} for one tool.
Json call_schema(const Json& fn, ToolCallFormat format, const std::string& at) {
  const char* args_key = format == ToolCallFormat::Hermes ? "arguments" : "parameters";
  Json params = fn.contains("parameters") && fn["parameters"].is_object() ? fn["parameters"]
                                                                          : Json{{"type", "object"}};
  reroot_refs(params, at + "/properties/" + args_key);
  Json call = {{"type", "object"},
               {"properties", {{"name", {{"const", fn["name"]}}}, {args_key, params}}},
               {"required", {"name", args_key}},
               {"additionalProperties", false}};
  return call;
}

// A format object's `type`: text, json_object or json_schema (anything else is a 400).
std::string format_type(const FieldReader& f) {
  std::string type = f.require_string("type");
  if (type != "text" && type != "json_object" && type != "json_schema")
    invalid_request(f.name("type"), "'{}' must be text, json_object or json_schema; got '{}'",
                    f.name("type"), type);
  return type;
}

}  // namespace

ToolCallFormat tool_call_format_of(const std::optional<std::string>& chat_template) {
  if (chat_template && chat_template->find("<tool_call>") != std::string::npos)
    return ToolCallFormat::Hermes;
  if (chat_template && chat_template->find("<|python_tag|>") != std::string::npos)
    return ToolCallFormat::LlamaJson;
  return ToolCallFormat::Hermes;  // what most open chat models and the parser expect
}

std::optional<GrammarSpec> read_response_format(const FieldReader& fields, const char* key) {
  const Json* format = fields.object_field(key);
  if (!format) return std::nullopt;
  FieldReader f(*format, key);
  const std::string type = format_type(f);
  if (type == "text") return std::nullopt;
  if (type == "json_object") return GrammarSpec::json_object();
  FieldReader js(require_object(f, "json_schema"), f.name("json_schema"));
  js.string("name");
  js.string("description");
  bool strict = js.boolean("strict").value_or(false);
  const Json* schema = js.object_field("schema");
  if (!schema) return GrammarSpec::json_object();
  return GrammarSpec::json_schema(*schema, json_options(strict));
}

std::optional<GrammarSpec> read_text_format(const FieldReader& text) {
  const Json* format = text.object_field("format");
  if (!format) return std::nullopt;
  FieldReader f(*format, text.name("format"));
  const std::string type = format_type(f);
  if (type == "text") return std::nullopt;
  if (type == "json_object") return GrammarSpec::json_object();
  f.string("name");
  f.string("description");
  bool strict = f.boolean("strict").value_or(false);
  return GrammarSpec::json_schema(require_object(f, "schema"), json_options(strict));
}

OutputConstraint read_structured_outputs(const FieldReader& fields, const JsonLimits& json_limits) {
  std::vector<std::pair<std::string, GrammarSpec>> asked;
  if (const Json* so = fields.object_field("structured_outputs")) {
    FieldReader s(*so, "structured_outputs");
    if (s.has("json")) {
      const Json& j = s.require("json");
      Json schema = j;
      if (j.is_string()) {  // vLLM takes the schema as JSON text too
        // Bounded like the body it came in: the schema compiler walks it recursively.
        JsonParse parsed = parse_bounded_json(j.get_ref<const std::string&>(), json_limits);
        if (!parsed.value)
          invalid_request(s.name("json"), "'{}' is not valid JSON: {}", s.name("json"),
                          parsed.message);
        schema = std::move(*parsed.value);
      }
      if (!schema.is_object() && !schema.is_boolean())
        invalid_request(s.name("json"), "'{}' must be a JSON Schema object", s.name("json"));
      asked.emplace_back(s.name("json"), GrammarSpec::json_schema(schema));
    }
    if (auto regex = s.string("regex")) asked.emplace_back(s.name("regex"), GrammarSpec::regex(*regex));
    if (s.has("choice")) {
      std::vector<std::string> choices = s.string_or_list("choice", StringListBounds{1024, 1024});
      asked.emplace_back(s.name("choice"), GrammarSpec::choice(std::move(choices)));
    }
    if (auto gbnf = s.string("grammar")) asked.emplace_back(s.name("grammar"), GrammarSpec::gbnf(*gbnf));
    if (s.boolean("json_object").value_or(false))
      asked.emplace_back(s.name("json_object"), GrammarSpec::json_object());
  }
  if (const Json* schema = fields.object_field("json_schema"))  // llama.cpp
    asked.emplace_back("json_schema", GrammarSpec::json_schema(*schema));
  if (auto gbnf = fields.string("grammar"); gbnf && !gbnf->empty())
    asked.emplace_back("grammar", GrammarSpec::gbnf(*gbnf));
  if (asked.size() > 1)
    invalid_request(asked[1].first, "'{}' and '{}' both constrain the output: give one",
                    asked[0].first, asked[1].first);
  if (asked.empty()) return {};
  return {std::move(asked[0].second), asked[0].first};
}

OutputConstraint read_output_constraint(const FieldReader& fields, const JsonLimits& json_limits) {
  OutputConstraint format{read_response_format(fields), "response_format"};
  OutputConstraint other = read_structured_outputs(fields, json_limits);
  if (format.spec && other.spec)
    invalid_request(other.param, "'response_format' and '{}' both constrain the output: give one",
                    other.param);
  return format.spec ? format : other;
}

GrammarSpec tool_call_spec(const Json& tools, const ToolForcing& forcing, ToolCallFormat format,
                           const std::string& param) {
  std::vector<const Json*> fns;
  bool strict = true;
  for (const Json& tool : tools) {
    const Json& fn = tool["function"];
    if (forcing.name && fn["name"] != *forcing.name) continue;
    fns.push_back(&fn);
    // Only an explicit "strict": false reads the parameters loosely (structured_output.h).
    const auto s = fn.find("strict");
    strict = strict && !(s != fn.end() && s->is_boolean() && !s->get<bool>());
  }
  if (fns.empty()) {
    if (forcing.name)
      invalid_request(param, "'{}' names '{}', which is not one of the tools", param, *forcing.name);
    invalid_request(param, "'{}' forces a tool call, but no tools are given", param);
  }
  Json schema;
  if (fns.size() == 1) {
    schema = call_schema(*fns[0], format, "");
  } else {
    schema = Json{{"anyOf", Json::array()}};
    for (size_t i = 0; i < fns.size(); i++)
      schema["anyOf"].push_back(call_schema(*fns[i], format, "/anyOf/" + std::to_string(i)));
  }
  GrammarSpec spec = GrammarSpec::json_schema(std::move(schema), json_options(strict));
  if (format == ToolCallFormat::Hermes) {
    spec.prefix = "<tool_call>\n";
    spec.suffix = "\n</tool_call>";
  }
  return spec;
}

std::shared_ptr<grammar::GrammarCache> make_grammar_cache(const Tokenizer& tokenizer,
                                                          const ModelInfo& info,
                                                          const GrammarCompileLimits& limits) {
  grammar::TokenVocabParams p;
  p.token_bytes = tokenizer.token_bytes();
  p.token_bytes.resize(size_t(info.vocab_size));  // ids past the tokenizer: never allowed
  p.is_special.assign(p.token_bytes.size(), 0);
  for (int32_t id = 0; id < tokenizer.vocab_size() && id < info.vocab_size; id++)
    p.is_special[size_t(id)] = tokenizer.is_special(id);
  for (int32_t eos : info.eos_token_ids)
    if (eos >= 0 && eos < info.vocab_size) p.eos_ids.push_back(eos);
  grammar::GrammarCacheOptions options;
  options.max_spec_bytes = limits.max_spec_bytes;
  options.program.max_insts = limits.max_insts;
  return std::make_shared<grammar::GrammarCache>(
      std::make_shared<const grammar::TokenVocab>(std::move(p)), options);
}

void attach_grammar(grammar::GrammarCache& cache, const OutputConstraint& constraint,
                    const ToolForcing& forcing, const Json& tools, ToolCallFormat format,
                    GenerationRequest& out) {
  if (!forcing.forced) return attach_grammar(cache, constraint, out);
  attach_grammar(cache, {tool_call_spec(tools, forcing, format, "tool_choice"), "tool_choice"}, out);
}

void attach_grammar(grammar::GrammarCache& cache, const OutputConstraint& constraint,
                    GenerationRequest& out) {
  if (!constraint.spec) return;
  const std::string& param = constraint.param;
  try {
    out.grammar = cache.get(*constraint.spec);
  } catch (const grammar::GrammarError& e) {
    std::string what = e.keyword().empty() ? "" : fmt::format(" (keyword '{}'", e.keyword());
    if (!e.path().empty()) what += fmt::format("{} at '{}'", what.empty() ? " (" : ",", e.path());
    if (!what.empty()) what += ")";
    throw ApiError(400, "invalid_request_error",
                   fmt::format("'{}' cannot be enforced{}: {}", param, what, e.message()),
                   param, "invalid_schema");
  }
}

}  // namespace tandem::server
