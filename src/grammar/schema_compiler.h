// The JSON Schema compiler's internals (json_schema.h is its interface). One instance per
// schema document: it resolves $refs against the document, merges schemas for allOf and for
// keywords beside $ref/anyOf/oneOf, and builds one rule per $ref target and per property or
// item value. schema_compiler.cpp holds the dispatch, schema_types.cpp the per-type
// grammars.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "grammar/grammar_ir.h"
#include "grammar/json_pieces.h"

namespace tandem::grammar {

using Json = nlohmann::ordered_json;

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarIr& ir, const Json& document, const JsonOptions& options);
  void compile();

 private:
  // Any value valid under s (located at path).
  ExprId value(const Json& s, const std::string& path, int depth = 0);
  // The same as a rule of its own: for values used in several places or recursively.
  ExprId value_rule(const Json& s, const std::string& path);
  ExprId ref(const Json& s, const std::string& path);
  ExprId alternatives(const Json& s, const std::string& path, int depth);
  ExprId enumeration(const Json& s, const std::string& path);
  ExprId typed(const Json& s, const std::string& path);

  // Per-type grammars (schema_types.cpp).
  ExprId object(const Json& s, const std::string& path);
  ExprId array(const Json& s, const std::string& path);
  ExprId string(const Json& s, const std::string& path);
  ExprId number(const Json& s, const std::string& path, bool integer);

  // Schema algebra.
  const Json& resolve(const std::string& pointer, const std::string& path) const;
  // s with its $ref (if any) resolved and merged with the keywords beside it.
  Json flatten(const Json& s, const std::string& path, int depth = 0) const;
  Json merge(const Json& a, const Json& b, const std::string& path, int depth = 0) const;
  void check_keywords(const Json& s, const std::string& path) const;
  bool provably_disjoint(const Json& a, const Json& b, const std::string& path) const;

  GrammarIr& ir_;
  const Json& document_;
  JsonOptions options_;
  JsonPieces json_;
  std::map<std::string, RuleId> rules_;        // $ref targets, by JSON pointer
  std::map<std::string, RuleId> value_rules_;  // other values, by their schema's text
};

// Helpers shared by the two files.
std::string pointer_child(const std::string& path, const std::string& token);
std::set<std::string> schema_types(const Json& s);  // the types s allows (all seven if open)
std::optional<std::string> string_field(const Json& s, const char* key, const std::string& path);
std::optional<uint32_t> count_field(const Json& s, const char* key, const std::string& path);

}  // namespace tandem::grammar
