// StopMatcher: finds stop strings in a row's streamed text and decides what may be
// emitted. Text that could still turn into a stop string is held back; once a stop
// string appears, nothing from its first byte on is ever emitted.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends newly decoded text; returns the text that is now safe to emit.
  std::string push(std::string_view text);
  // At the end of the row: everything still held back (nothing after a match).
  std::string flush();
  const std::optional<std::string>& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  std::optional<std::string> matched_;
};

}  // namespace tandem
