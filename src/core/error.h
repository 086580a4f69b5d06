// Errors: one exception type that carries where and why, thrown deep inside a module
// and caught at the edge that can report it (the CLI's main, the HTTP handler, the
// engine's per-request guard). `Result<T>` carries an error as a value across module
// boundaries where the caller branches on it.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

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

// A value or the error that prevented it.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & {
    if (!ok()) throw std::get<Error>(v_);
    return std::get<T>(v_);
  }
  T&& value() && {
    if (!ok()) throw std::get<Error>(v_);
    return std::get<T>(std::move(v_));
  }
  const Error& error() const { return std::get<Error>(v_); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Error> v_;
};

// Runs fn(), turning a thrown tandem::Error into a Result holding it.
template <typename Fn>
auto capture(Fn&& fn) -> Result<decltype(fn())> {
  try {
    return fn();
  } catch (const Error& e) {
    return e;
  }
}

}  // namespace tandem
