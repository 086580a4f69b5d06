// Table-driven checks shared by the template unit tests. Each case's expectation is what
// jinja2 3.1 (transformers' sandboxed chat-template environment) produces for it: the
// rendered text, or for error cases the exception message (tandem must throw a
// TemplateError whose message contains it).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "template/jinja.h"

namespace tandem::jinja::testing {

struct Case {
  const char* source;
  const char* context;   // JSON object text, or "" for none
  const char* expected;  // rendered text, or jinja2's "ErrorType: message"
  bool is_error;
};

inline std::string render(const std::string& source, const nlohmann::ordered_json& context = {}) {
  RenderOptions options;
  options.now = "2026-11-29T12:00:00";
  return Template::parse(source).render(
      context.is_null() ? nlohmann::ordered_json::object() : context, options);
}

// The message part of jinja2's "ErrorType: message" (raise_exception's text is verbatim).
inline std::string error_text(const std::string& expected) {
  auto colon = expected.find(": ");
  return colon == std::string::npos ? expected : expected.substr(colon + 2);
}

inline void check_case(const Case& c) {
  SCOPED_TRACE(std::string("template: ") + c.source);
  nlohmann::ordered_json context =
      *c.context ? nlohmann::ordered_json::parse(c.context) : nlohmann::ordered_json::object();
  if (!c.is_error) {
    try {
      EXPECT_EQ(render(c.source, context), c.expected);
    } catch (const TemplateError& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
    return;
  }
  try {
    std::string got = render(c.source, context);
    ADD_FAILURE() << "rendered " << ::testing::PrintToString(got)
                  << ", expected error: " << c.expected;
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find(error_text(c.expected)), std::string::npos)
        << "message: " << e.what() << "\nwanted:  " << c.expected;
  }
}

template <size_t N>
void check_cases(const Case (&cases)[N]) {
  for (const Case& c : cases) check_case(c);
}

}  // namespace tandem::jinja::testing
