// Internal error plumbing: every failure inside the interpreter is a RenderError naming the
// Python/jinja2 exception class it stands for, so the final message reads like jinja2's.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>

#include "template/jinja.h"

namespace tandem::jinja {

enum class ErrorKind {
  Syntax,        // TemplateSyntaxError
  Assertion,     // TemplateAssertionError (unknown filter/test at compile time)
  Undefined,     // UndefinedError
  Security,      // SecurityError
  Runtime,       // TemplateRuntimeError
  Raised,        // raise_exception(msg): jinja2.exceptions.TemplateError(msg)
  Type,          // TypeError
  Value,         // ValueError
  ZeroDivision,  // ZeroDivisionError
  Overflow,      // OverflowError
  Recursion,     // RecursionError
  Filter,        // FilterArgumentError
  Index,         // IndexError
  Key,           // KeyError
  Attribute,     // AttributeError
  Limit,         // a RenderLimits bound (tandem's own: the sandbox's resource limits)
  Cancelled,     // RenderLimits::cancel was raised
};

const char* error_kind_name(ErrorKind kind);

class RenderError : public TemplateError {
 public:
  RenderError(ErrorKind kind, std::string detail);
  ErrorKind kind() const { return kind_; }
  // Set on ErrorKind::Limit errors: which bound.
  std::optional<RenderLimit> exceeded() const { return exceeded_; }
  void set_exceeded(RenderLimit limit) { exceeded_ = limit; }
  const std::string& detail() const { return detail_; }
  int line() const { return line_; }
  void set_line(int line) { line_ = line; }
  // The message handed to callers: verbatim for raise_exception, else "Kind: detail (line N)".
  std::string full_message() const;

 private:
  ErrorKind kind_;
  std::string detail_;
  int line_ = 0;
  std::optional<RenderLimit> exceeded_;
};

[[noreturn]] void raise(ErrorKind kind, std::string detail);
// A TemplateSyntaxError at `line` of the template (the lexer's and its string literals').
[[noreturn]] void raise_syntax(int line, const std::string& detail);
// A RenderLimits bound was passed: an error of `kind` (RenderLimitError by default; deep
// recursion stays Python's RecursionError) that carries which bound.
[[noreturn]] void raise_limit(RenderLimit limit, std::string detail,
                              ErrorKind kind = ErrorKind::Limit);

template <typename... Args>
[[noreturn]] void raise(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  raise(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tandem::jinja
