// What the schema compiler knows about JSON Schema's keywords: which constrain a value
// (and for which type), which it refuses, and small facts about values.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem::grammar {

using Json = nlohmann::ordered_json;

constexpr int kMaxMergeDepth = 64;

// The seven JSON Schema types.
const std::set<std::string>& all_types();
// For each type, the keywords that only constrain values of that type (used to infer a
// missing `type`): object: properties, required, ...
const std::vector<std::pair<std::string, std::vector<const char*>>>& keyword_families();

bool is_unsupported_keyword(std::string_view key);  // ones tandem refuses
bool is_constraint_keyword(std::string_view key);   // ones tandem enforces
// s without its annotations and unknown keywords.
Json constraints_of(const Json& s);

// The values const/enum allow (both present: those in both); nullopt when neither is set.
std::optional<std::vector<Json>> fixed_values(const Json& s, const std::string& path);
// JSON equality as JSON Schema reads it: objects are unordered, 1 equals 1.0.
bool json_equal(const Json& a, const Json& b);
bool json_contains(const std::vector<Json>& values, const Json& v);

// Whether JSON value v has one of the types (an integral number is an integer).
bool value_has_type(const Json& v, const std::set<std::string>& types);

}  // namespace tandem::grammar
