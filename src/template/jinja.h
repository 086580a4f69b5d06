// A Jinja2 interpreter for chat templates. It renders the templates published with models
// exactly as transformers does: jinja2's ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and loop controls, transformers' `tojson`, and the globals
// `raise_exception(msg)` and `strftime_now(fmt)`.
//
// Template::parse runs once per model; Template::render is const and may be called from
// many threads at once (each render owns its own scopes and values).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tandem::jinja {

// A template that fails to parse, or fails while rendering. The message carries the
// template's own text verbatim for raise_exception("..."); other failures read like
// jinja2's ("UndefinedError: 'x' is undefined (line 3)").
class TemplateError : public tandem::Error {
 public:
  using Error::Error;
};

struct RenderOptions {
  // ISO "2026-11-29T12:00:00": the time strftime_now formats; unset means local time now.
  std::optional<std::string> now;
};

struct Program;  // the parsed template (ast.h)

class Template {
 public:
  static Template parse(std::string source);  // throws TemplateError (with line number)
  // `context` must be a JSON object: its keys become template variables.
  std::string render(const nlohmann::ordered_json& context,
                     const RenderOptions& options = {}) const;  // throws TemplateError

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace tandem::jinja
