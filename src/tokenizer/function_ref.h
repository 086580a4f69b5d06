// A non-owning reference to a callable (like C++26 std::function_ref): two pointers, no
// allocation. The tokenizer streams pieces and matches through callbacks with it, so
// nothing proportional to the input is ever materialized. The callable must outlive the
// reference (pass lambdas as lvalues or temporaries within one full expression).
#pragma once

#include <type_traits>
#include <utility>

namespace tandem::tok {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& fn)  // NOLINT(google-explicit-constructor)
      : obj_(const_cast<void*>(static_cast<const void*>(&fn))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace tandem::tok
