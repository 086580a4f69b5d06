#include "template/render_budget.h"

#include "template/errors.h"

namespace tandem::jinja {
namespace {

thread_local RenderBudget* t_budget = nullptr;
thread_local int t_walk_depth = 0;

std::string mib(size_t bytes) {
  return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20));
}

}  // namespace

RenderBudget::RenderBudget(const RenderLimits& limits) : limits_(limits), outer_(t_budget) {
  if (limits_.max_depth > kMaxRenderDepth) limits_.max_depth = kMaxRenderDepth;
  t_budget = this;
}

RenderBudget::~RenderBudget() {
  t_budget = outer_;
}

RenderBudget* RenderBudget::current() {
  return t_budget;
}

void RenderBudget::step() {
  if (limits_.cancel && limits_.cancel->load(std::memory_order_relaxed))
    raise(ErrorKind::Cancelled, "the render was cancelled (the server is stopping)");
  if (++num_steps_ > limits_.max_iterations)
    raise_limit(RenderLimit::Iterations,
                fmt::format("the template ran more than {} loop iterations and macro calls",
                            limits_.max_iterations));
}

void RenderBudget::charge(size_t bytes) {
  num_bytes_ += bytes;
  if (num_bytes_ > limits_.max_memory_bytes || bytes > limits_.max_memory_bytes)
    raise_limit(RenderLimit::Memory, fmt::format("the template allocated more than {} of memory",
                                                 mib(limits_.max_memory_bytes)));
}

void RenderBudget::check_output(size_t size) const {
  if (size > limits_.max_output_bytes)
    raise_limit(RenderLimit::Output,
                fmt::format("the template's output grew past {}", mib(limits_.max_output_bytes)));
}

void charge_render(size_t bytes) {
  if (t_budget) t_budget->charge(bytes);
}

ValueWalkGuard::ValueWalkGuard(const char* what) {
  if (t_walk_depth >= kMaxValueDepth)
    raise(ErrorKind::Recursion, "maximum recursion depth exceeded while {}", what);
  ++t_walk_depth;
}

ValueWalkGuard::~ValueWalkGuard() {
  --t_walk_depth;
}

}  // namespace tandem::jinja
