// What one render may spend (RenderLimits, jinja.h) and what it has spent so far.
//
// Template::render installs a budget on its thread for the length of the render; the
// interpreter charges it per loop iteration and call, per byte of output, and value
// constructors charge the memory they take. The operations that allocate from a number the
// template chose (repetition, padding widths) charge before they allocate, so a template
// cannot ask for a terabyte in one step. Outside a render (tests building values by hand)
// nothing is charged.
//
// Memory is counted as allocated, never refunded: a bound on everything a render creates
// is also a bound on what it can hold at once, and it bounds the time spent copying.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "template/jinja.h"

namespace tandem::jinja {

class RenderBudget {
 public:
  explicit RenderBudget(const RenderLimits& limits);  // installs itself on this thread
  ~RenderBudget();
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  // The budget of the render running on this thread; null outside renders.
  static RenderBudget* current();

  const RenderLimits& limits() const { return limits_; }
  // One loop iteration or macro call; also where a raised cancel flag ends the render.
  void step();
  void charge(size_t bytes);
  // A text the render builds has grown to `size` bytes.
  void check_output(size_t size) const;

 private:
  RenderLimits limits_;
  RenderBudget* outer_;  // a render inside a render (none today) restores it
  int64_t num_steps_ = 0;
  size_t num_bytes_ = 0;
};

// Charges the current render, if any. For value constructors and allocating operations.
void charge_render(size_t bytes);
// count × size, saturating (a template may ask for 10**18 copies).
inline size_t saturating_product(size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) return SIZE_MAX;
  return count * size;
}
// Appends `piece` to a string a builder grows by a number of steps the template controls
// (join, replace, repr of shared values, padding), charging first: none can outgrow the
// budget, however the pieces multiply.
inline void append_charged(std::string& out, std::string_view piece) {
  charge_render(piece.size());
  out.append(piece);
}

// Depth of one recursive walk over values (repr, str, tojson, ==, nested generators): past
// kMaxValueDepth levels it raises RecursionError, as Python's recursion limit would. Works
// outside renders too.
inline constexpr int kMaxValueDepth = 1000;
class ValueWalkGuard {
 public:
  explicit ValueWalkGuard(const char* what);
  ~ValueWalkGuard();
  ValueWalkGuard(const ValueWalkGuard&) = delete;
  ValueWalkGuard& operator=(const ValueWalkGuard&) = delete;
};

}  // namespace tandem::jinja
