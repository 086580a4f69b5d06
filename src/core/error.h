// Errors: one exception type that carries where and why, thrown deep inside a module
// and caught at the edge that can report it (the CLI's main, the HTTP handler, the
// engine's per-request guard).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace tandem {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(std::move(message)) {}
};

// Throws tandem::Error with a formatted message: fail("{}: tensor '{}' missing", file, name).
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// Internal invariant; a failure is a bug in tandem, reported with its source location.
#define TANDEM_CHECK(cond, ...)                                                          \
  do {                                                                                   \
    if (!(cond))                                                                         \
      ::tandem::fail("{}:{}: check failed: {} {}", __FILE__, __LINE__, #cond,            \
                     ::fmt::format("" __VA_ARGS__));                                     \
  } while (0)

}  // namespace tandem
