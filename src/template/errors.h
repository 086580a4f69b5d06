// Internal error plumbing: every failure inside the interpreter is a RenderError naming the
// Python/jinja2 exception class it stands for, so the final message reads like jinja2's.
#pragma once

#include <fmt/format.h>

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
};

const char* error_kind_name(ErrorKind kind);

class RenderError : public TemplateError {
 public:
  RenderError(ErrorKind kind, std::string detail);
  ErrorKind kind() const { return kind_; }
  const std::string& detail() const { return detail_; }
  int line() const { return line_; }
  void set_line(int line) { line_ = line; }
  // The message handed to callers: verbatim for raise_exception, else "Kind: detail (line N)".
  std::string full_message() const;

 private:
  ErrorKind kind_;
  std::string detail_;
  int line_ = 0;
};

[[noreturn]] void raise(ErrorKind kind, std::string detail);

template <typename... Args>
[[noreturn]] void raise(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  raise(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tandem::jinja
