// What a request asks its output to be, as one value: the key of the compiled-grammar
// cache, and the input of compile_program().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "grammar/json_pieces.h"
#include "grammar/program.h"

namespace tandem::grammar {

enum class SpecKind : uint8_t {
  JsonSchema,  // OpenAI response_format json_schema, tool parameters, vLLM `json`, llama.cpp
               // json_schema
  JsonObject,  // OpenAI response_format json_object: any JSON object
  Regex,       // vLLM `regex`: the whole output matches (regex.h)
  Choices,     // vLLM `choice`: the output is exactly one of the strings
  Gbnf,        // llama.cpp `grammar`, vLLM `grammar` (gbnf.h)
};

struct GrammarSpec {
  SpecKind kind = SpecKind::JsonObject;
  // JsonSchema (set then, never changed). ordered_json: the order of `properties` is the
  // order of the output. Shared and const, so that copies of a spec stay cheap and this
  // header needs only json's declaration.
  std::shared_ptr<const nlohmann::ordered_json> schema;
  std::string text;                  // Regex: the pattern; Gbnf: the grammar
  std::vector<std::string> choices;  // Choices
  JsonOptions json;                  // JsonSchema, JsonObject
  // Literal text before and after the output of any kind: the tags around a forced tool
  // call ("<tool_call>\n" ... "\n</tool_call>"). Empty: none.
  std::string prefix, suffix;

  static GrammarSpec json_schema(nlohmann::ordered_json schema, JsonOptions options = {});
  static GrammarSpec json_object(JsonOptions options = {});
  static GrammarSpec regex(std::string pattern);
  static GrammarSpec choice(std::vector<std::string> choices);
  static GrammarSpec gbnf(std::string text);

  // Equal for specs that compile to the same grammar (the same bytes in the same order).
  std::string key() const;
};

// Compiles a spec to its program. Throws GrammarError (path and keyword of the problem).
std::shared_ptr<const Program> compile_program(const GrammarSpec& spec,
                                               const ProgramLimits& limits = {});

}  // namespace tandem::grammar
