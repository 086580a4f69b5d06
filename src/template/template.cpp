// The public entry points: parse once, render many times (const, thread-safe).
#include "template/ast.h"

#include <nlohmann/json.hpp>
#include "template/errors.h"
#include "template/interpreter.h"
#include "template/jinja.h"
#include "template/parser.h"
#include "template/render_budget.h"

namespace tandem::jinja {

Template Template::parse(std::string source) {
  try {
    return Template(parse_program(source));
  } catch (const RenderError& e) {
    throw TemplateError(e.full_message());
  } catch (const std::exception& e) {
    throw TemplateError(fmt::format("internal error while parsing the template: {}", e.what()));
  }
}

namespace {

TemplateError::Cause cause_of(const RenderError& e) {
  if (e.kind() == ErrorKind::Cancelled) return TemplateError::Cause::Cancelled;
  if (e.exceeded()) return TemplateError::Cause::Limit;
  return TemplateError::Cause::Template;
}

}  // namespace

std::string Template::render(const nlohmann::ordered_json& context,
                             const RenderOptions& options) const {
  try {
    RenderBudget budget(options.limits);
    Interpreter in(options, context, budget);
    return in.render(*program_);
  } catch (const RenderError& e) {
    throw TemplateError(e.full_message(), cause_of(e), e.exceeded());
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError("RenderLimitError: the render ran out of memory",
                        TemplateError::Cause::Limit, RenderLimit::Memory);
  } catch (const std::exception& e) {
    throw TemplateError(fmt::format("internal error while rendering the template: {}", e.what()));
  }
}

}  // namespace tandem::jinja
