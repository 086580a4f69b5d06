// An independent JSON Schema validator for the tests: it decides validity from the
// keywords' meaning (the JSON Schema spec and ajv-formats' checks), sharing no code with the
// grammar compiler, so the compiler's accept/reject tables and random outputs can be checked
// against it. It covers the keywords tandem enforces; patterns go through std::regex
// (ECMAScript), so test patterns stay ASCII.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tandem::grammar::test {

// Whether value is valid under schema; $refs resolve against root.
bool schema_valid(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& value);

// The same for a JSON text: false when the text is not JSON.
bool schema_valid_text(const nlohmann::ordered_json& schema, const std::string& text);

}  // namespace tandem::grammar::test
