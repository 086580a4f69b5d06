// The public entry points: parse once, render many times (const, thread-safe).
#include "template/ast.h"
#include "template/errors.h"
#include "template/interpreter.h"
#include "template/jinja.h"
#include "template/parser.h"

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

std::string Template::render(const nlohmann::ordered_json& context,
                             const RenderOptions& options) const {
  try {
    Interpreter in(options, context);
    return in.render(*program_);
  } catch (const RenderError& e) {
    throw TemplateError(e.full_message());
  } catch (const TemplateError&) {
    throw;
  } catch (const std::exception& e) {
    throw TemplateError(fmt::format("internal error while rendering the template: {}", e.what()));
  }
}

}  // namespace tandem::jinja
