#include "grammar/grammar_spec.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/grammar_error.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace tandem::grammar {

GrammarSpec GrammarSpec::json_schema(nlohmann::ordered_json schema, JsonOptions options) {
  GrammarSpec s;
  s.kind = SpecKind::JsonSchema;
  s.schema = std::make_shared<const nlohmann::ordered_json>(std::move(schema));
  s.json = options;
  return s;
}

GrammarSpec GrammarSpec::json_object(JsonOptions options) {
  GrammarSpec s;
  s.kind = SpecKind::JsonObject;
  s.json = options;
  return s;
}

GrammarSpec GrammarSpec::regex(std::string pattern) {
  GrammarSpec s;
  s.kind = SpecKind::Regex;
  s.text = std::move(pattern);
  return s;
}

GrammarSpec GrammarSpec::choice(std::vector<std::string> choices) {
  GrammarSpec s;
  s.kind = SpecKind::Choices;
  s.choices = std::move(choices);
  return s;
}

GrammarSpec GrammarSpec::gbnf(std::string text) {
  GrammarSpec s;
  s.kind = SpecKind::Gbnf;
  s.text = std::move(text);
  return s;
}

namespace {

std::string body_key(const GrammarSpec& spec);

// root := prefix body suffix.
void wrap_root(GrammarIr& ir, const std::string& prefix, const std::string& suffix) {
  RuleId body = ir.root();
  RuleId wrapped = ir.add_rule("wrapped");
  ir.set_body(wrapped, ir.seq({ir.literal(prefix), ir.ref(body), ir.literal(suffix)}));
  ir.set_root(wrapped);
}

}  // namespace

std::string GrammarSpec::key() const {
  if (prefix.empty() && suffix.empty()) return body_key(*this);
  // Length-prefixed, so no prefix can imitate the body's key.
  return fmt::format("wrap:{}:{}:{}:{}:", prefix.size(), prefix, suffix.size(), suffix) +
         body_key(*this);
}

namespace {

std::string body_key(const GrammarSpec& spec) {
  const JsonOptions& json = spec.json;
  const auto& schema = spec.schema;
  const auto& text = spec.text;
  const auto& choices = spec.choices;
  std::string json_opts = fmt::format("ws={},strict={}{}", json.max_whitespace,
                                      int(json.strict_properties), int(json.strict_items));
  switch (spec.kind) {
    case SpecKind::JsonSchema:
      return "json_schema:" + json_opts + ":" +
             schema->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    case SpecKind::JsonObject:
      return "json_object:" + json_opts;
    case SpecKind::Regex:
      return "regex:" + text;
    case SpecKind::Gbnf:
      return "gbnf:" + text;
    case SpecKind::Choices: {
      // Length-prefixed, so no choice text can imitate a separator.
      std::string k = "choice";
      for (const std::string& c : choices) k += fmt::format(":{}:{}", c.size(), c);
      return k;
    }
  }
  return "";
}

}  // namespace

std::shared_ptr<const Program> compile_program(const GrammarSpec& spec,
                                               const ProgramLimits& limits) {
  GrammarIr ir;
  switch (spec.kind) {
    case SpecKind::JsonSchema:
      compile_json_schema(ir, *spec.schema, spec.json);
      break;
    case SpecKind::JsonObject:
      compile_json_schema(ir, nlohmann::ordered_json{{"type", "object"}}, spec.json);
      break;
    case SpecKind::Regex: {
      RuleId root = ir.add_rule("regex");
      ir.set_body(
          root,
          compile_regex(ir, spec.text, RegexContext{raw_utf8_encoder(), false, "", "regex"}).expr);
      ir.set_root(root);
      break;
    }
    case SpecKind::Choices: {
      if (spec.choices.empty())
        grammar_fail("", "choice", "'choice' must list at least one string");
      std::vector<ExprId> options;
      for (const std::string& c : spec.choices) options.push_back(ir.literal(c));
      RuleId root = ir.add_rule("choice");
      ir.set_body(root, ir.alt(std::move(options)));
      ir.set_root(root);
      break;
    }
    case SpecKind::Gbnf:
      compile_gbnf(ir, spec.text);
      break;
  }
  if (!spec.prefix.empty() || !spec.suffix.empty()) wrap_root(ir, spec.prefix, spec.suffix);
  return std::make_shared<const Program>(build_program(ir, limits));
}

}  // namespace tandem::grammar
