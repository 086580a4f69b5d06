// Structured output on every API (issue 21): the request fields that ask for it, read into
// one grammar::GrammarSpec, then compiled in the HTTP thread by the model's GrammarCache,
// so a schema tandem cannot enforce is a 400 naming its keyword and path before the engine
// sees the request. The fields:
//   OpenAI         response_format {"type": "json_object"} | {"type": "json_schema",
//                  "json_schema": {"name", "schema", "strict"}} (chat, completions);
//                  Responses text.format {"type": "json_schema", "name", "schema", "strict"}
//   tools          tool_choice "required" | {"type": "function", "function": {"name"}}
//                  (OpenAI), {"type": "any"} | {"type": "tool", "name"} (Anthropic): the
//                  whole output is one call, in the format the model's template and
//                  tool_calls.h's parser share, its arguments following the tool's schema
//   vLLM           structured_outputs {"json" | "regex" | "choice" | "grammar" |
//                  "json_object"} (one of them)
//   llama.cpp      json_schema (a schema object), grammar (GBNF text) on completions
// strict: true reads an object schema as OpenAI's strict mode does (no properties beyond
// those listed, unless additionalProperties says otherwise); otherwise as JSON Schema
// reads it (other properties are allowed, each any JSON value).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine_api.h"
#include "grammar/grammar.h"
#include "server/common/json_text.h"
#include "server/common/request_fields.h"
#include "server/common/server_limits.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

// How the model writes a tool call (and tool_calls.h reads it back).
enum class ToolCallFormat : uint8_t {
  Hermes,     // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen, Hermes)
  LlamaJson,  // {"name": ..., "parameters": {...}} as the whole output (Llama 3.1)
};

// The format the chat template's text suggests: Hermes when it mentions <tool_call>.
ToolCallFormat tool_call_format_of(const std::optional<std::string>& chat_template);

// What a request forces about tools: a call to any of them, or to the one named.
struct ToolForcing {
  bool forced = false;
  std::optional<std::string> name;  // set: that tool (it must be in the list)
};


// A request's constraint as parsed: the spec (nullopt: none) and the field it came from.
struct OutputConstraint {
  std::optional<grammar::GrammarSpec> spec;
  std::string param;
};

// The spec asked for, or nullopt for unconstrained output. 400s for malformed fields.
std::optional<grammar::GrammarSpec> read_response_format(const FieldReader& fields,
                                                         const char* key = "response_format");
std::optional<grammar::GrammarSpec> read_text_format(const FieldReader& text);
// vLLM's structured_outputs, llama.cpp's json_schema / grammar.
OutputConstraint read_structured_outputs(const FieldReader& fields,
                                         const JsonLimits& json_limits = {});
// All of the above that chat and completions take: at most one may be given.
OutputConstraint read_output_constraint(const FieldReader& fields,
                                        const JsonLimits& json_limits = {});

// One call to one of `tools` (OpenAI shape: [{"type": "function", "function": {"name",
// "parameters"}}], as normalize_openai_tools keeps them). `param` names the field in errors.
grammar::GrammarSpec tool_call_spec(const Json& tools, const ToolForcing& forcing,
                                    ToolCallFormat format, const std::string& param);

// The served model's grammar cache: its vocabulary as bytes, padded to the logits' width,
// compiling within `limits` (--max-grammar-bytes, --max-grammar-insts).
std::shared_ptr<grammar::GrammarCache> make_grammar_cache(const Tokenizer& tokenizer,
                                                          const ModelInfo& info,
                                                          const GrammarCompileLimits& limits = {});

// Compiles the constraint into out.grammar (nothing when there is none): a GrammarError is
// a 400 on its field that names the keyword and the path. A forced tool call (with the
// request's tools, OpenAI shape) takes precedence over a response format.
void attach_grammar(grammar::GrammarCache& cache, const OutputConstraint& constraint,
                    GenerationRequest& out);
void attach_grammar(grammar::GrammarCache& cache, const OutputConstraint& constraint,
                    const ToolForcing& forcing, const Json& tools, ToolCallFormat format,
                    GenerationRequest& out);

}  // namespace tandem::server
