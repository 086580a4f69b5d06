// A Jinja2 interpreter for chat templates. It renders the templates published with models
// exactly as transformers does: jinja2's ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and loop controls, transformers' `tojson`, and the globals
// `raise_exception(msg)` and `strftime_now(fmt)`.
//
// Template::parse runs once per model; Template::render is const and may be called from
// many threads at once (each render owns its own scopes and values).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace tandem::jinja {

// A template that fails to parse, or fails while rendering. The message carries the
// template's own text verbatim for raise_exception("..."); other failures read like
// jinja2's ("UndefinedError: 'x' is undefined (line 3)").
// The RenderLimits bound a render ran past.
enum class RenderLimit : uint8_t { Iterations, Output, Memory, Depth };

class TemplateError : public tandem::Error {
 public:
  // Why a render stopped: the template itself failed, it ran past a RenderLimits bound
  // (which one: limit()), or its cancel flag was raised.
  enum class Cause : uint8_t { Template, Limit, Cancelled };
  explicit TemplateError(std::string message, Cause cause = Cause::Template,
                         std::optional<RenderLimit> limit = std::nullopt)
      : Error(std::move(message)), cause_(cause), limit_(limit) {}
  Cause cause() const { return cause_; }
  std::optional<RenderLimit> limit() const { return limit_; }

 private:
  Cause cause_;
  std::optional<RenderLimit> limit_;
};

// The bounds of one render. Templates come with downloaded model folders, so a render must
// not be able to take the process down: each bound ends it with a TemplateError of cause
// Limit that names the bound, and the interpreter's own recursion (value walks such as repr
// and tojson, nested generators) raises RecursionError past a fixed depth, as Python does.
struct RenderLimits {
  int64_t max_iterations = 1'000'000;           // loop iterations + macro calls, in total
  size_t max_output_bytes = size_t(16) << 20;   // any one text the render builds, the result too
  size_t max_memory_bytes = size_t(128) << 20;  // strings and containers it creates, in total
  int max_depth = 200;                          // macro calls and recursive-loop levels nested
  // Checked with every iteration and call: once true, the render ends (cause Cancelled).
  const std::atomic<bool>* cancel = nullptr;
};
// The largest max_depth a render accepts: deeper would risk the thread's stack.
inline constexpr int kMaxRenderDepth = 500;

struct RenderOptions {
  // ISO "2026-11-29T12:00:00": the time strftime_now formats; unset means local time now.
  std::optional<std::string> now;
  RenderLimits limits;
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
