// The one error of the grammar module: a spec that is invalid (bad JSON Schema, regex or
// grammar text) or that asks for something the engine cannot enforce. It names where
// (`path`: a JSON pointer into the schema such as "/properties/age", or "line 3, column 7"
// of a grammar text) and which keyword, so the server can answer 400 with both.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"

namespace tandem::grammar {

// Bounds of the two text parsers (GBNF and regex): a repetition count above kMaxRepeat and
// groups nested deeper than kMaxDepth are refused with a GrammarError.
inline constexpr uint32_t kMaxRepeat = 10'000;
inline constexpr int kMaxDepth = 200;

class GrammarError : public Error {
 public:
  GrammarError(std::string path, std::string keyword, std::string message)
      : Error(describe(path, keyword, message)),
        path_(std::move(path)),
        keyword_(std::move(keyword)),
        message_(std::move(message)) {}

  const std::string& path() const { return path_; }        // "" for the whole spec
  const std::string& keyword() const { return keyword_; }  // "" when no keyword is at fault
  const std::string& message() const { return message_; }  // the reason, without the place

 private:
  static std::string describe(const std::string& path, const std::string& keyword,
                              const std::string& message) {
    std::string where = path.empty() ? "" : fmt::format(" at '{}'", path);
    std::string what = keyword.empty() ? "" : fmt::format(" '{}'", keyword);
    return fmt::format("grammar{}{}: {}", what, where, message);
  }

  std::string path_, keyword_, message_;
};

template <typename... Args>
[[noreturn]] void grammar_fail(std::string path, std::string keyword,
                               fmt::format_string<Args...> format, Args&&... args) {
  throw GrammarError(std::move(path), std::move(keyword),
                     fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tandem::grammar
