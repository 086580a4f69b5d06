#include "template/errors.h"

namespace tandem::jinja {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Syntax:
      return "TemplateSyntaxError";
    case ErrorKind::Assertion:
      return "TemplateAssertionError";
    case ErrorKind::Undefined:
      return "UndefinedError";
    case ErrorKind::Security:
      return "SecurityError";
    case ErrorKind::Runtime:
      return "TemplateRuntimeError";
    case ErrorKind::Raised:
      return "TemplateError";
    case ErrorKind::Type:
      return "TypeError";
    case ErrorKind::Value:
      return "ValueError";
    case ErrorKind::ZeroDivision:
      return "ZeroDivisionError";
    case ErrorKind::Overflow:
      return "OverflowError";
    case ErrorKind::Recursion:
      return "RecursionError";
    case ErrorKind::Filter:
      return "FilterArgumentError";
    case ErrorKind::Index:
      return "IndexError";
    case ErrorKind::Key:
      return "KeyError";
    case ErrorKind::Attribute:
      return "AttributeError";
    case ErrorKind::Limit:
      return "RenderLimitError";
    case ErrorKind::Cancelled:
      return "RenderCancelled";
  }
  return "TemplateError";
}

RenderError::RenderError(ErrorKind kind, std::string detail)
    : TemplateError(detail), kind_(kind), detail_(std::move(detail)) {}

std::string RenderError::full_message() const {
  if (kind_ == ErrorKind::Raised) return detail_;
  std::string msg = fmt::format("{}: {}", error_kind_name(kind_), detail_);
  if (line_ > 0) msg += fmt::format(" (line {})", line_);
  return msg;
}

void raise(ErrorKind kind, std::string detail) {
  throw RenderError(kind, std::move(detail));
}

void raise_syntax(int line, const std::string& detail) {
  RenderError e(ErrorKind::Syntax, detail);
  e.set_line(line);
  throw e;
}

void raise_limit(RenderLimit limit, std::string detail, ErrorKind kind) {
  RenderError e(kind, std::move(detail));
  e.set_exceeded(limit);
  throw e;
}

}  // namespace tandem::jinja
