// The render sandbox's resource bounds (RenderLimits): every way a template from a model
// folder could take the process down ends in a TemplateError that names the bound — loop
// iterations, output size, memory, recursion (macros and recursive loops), values nested
// past Python's recursion limit, and a cancel flag checked as it runs. Each case would
// otherwise run for minutes, use gigabytes, or overflow the stack.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <thread>

#include "template/jinja.h"

namespace tandem::jinja {
namespace limits_test {

using nlohmann::ordered_json;

struct Outcome {
  std::string text;
  std::string error;
  TemplateError::Cause cause = TemplateError::Cause::Template;
  std::optional<RenderLimit> limit;
};

Outcome render(const std::string& source, RenderLimits limits = {},
               const ordered_json& context = ordered_json::object()) {
  Outcome o;
  try {
    o.text = Template::parse(source).render(context, RenderOptions{std::nullopt, limits});
  } catch (const TemplateError& e) {
    o.error = e.what();
    o.cause = e.cause();
    o.limit = e.limit();
  }
  return o;
}

void expect_limit(const Outcome& o, RenderLimit limit, const char* words) {
  EXPECT_EQ(o.cause, TemplateError::Cause::Limit) << o.error;
  ASSERT_TRUE(o.limit.has_value()) << o.error;
  EXPECT_EQ(*o.limit, limit) << o.error;
  EXPECT_NE(o.error.find(words), std::string::npos) << o.error;
}

TEST(RenderLimits, NestedLoopsStopAtTheIterationBound) {
  // 10^10 iterations unbounded (the issue: 8.5 GB in 27 s, and SIGTERM could not stop it).
  RenderLimits l;
  l.max_iterations = 100000;
  Outcome o = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                     "{% endfor %}",
                     l);
  expect_limit(o, RenderLimit::Iterations, "more than 100000 loop iterations");
  EXPECT_EQ(render("{% for i in range(1000) %}{% endfor %}ok", l).text, "ok");
}

TEST(RenderLimits, MacroCallsCountAsIterations) {
  RenderLimits l;
  l.max_iterations = 1000;
  // Two calls per level: 2^30 calls without the bound, all within the depth limit.
  Outcome o = render(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
      "{{ f(30) }}",
      l);
  expect_limit(o, RenderLimit::Iterations, "macro calls");
}

TEST(RenderLimits, OutputStopsAtItsBound) {
  RenderLimits l;
  l.max_output_bytes = 1 << 20;
  Outcome o = render("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", l);
  expect_limit(o, RenderLimit::Output, "output grew past 1.0 MiB");
  // Text built inside a macro or a set block is bounded the same way.
  o = render("{% set s %}{% for i in range(100000) %}xxxxxxxxxxxxxxxxxxxx{% endfor %}{% endset %}",
             l);
  expect_limit(o, RenderLimit::Output, "output grew past");
}

TEST(RenderLimits, OneHugeAllocationIsRefusedBeforeItIsMade) {
  RenderLimits l;
  l.max_memory_bytes = 64 << 20;
  // Each would ask for a terabyte at once.
  for (const char* src :
       {"{{ 'x' * 1000000000000 }}", "{{ ([1] * 1000000000000) | length }}",
        "{{ 'x' | center(1000000000000) }}", "{{ '%100000000s' % 'x' }}",
        "{{ '{:>100000000}'.format('x') }}", "{{ 'a\nb' | indent(1000000000000) }}",
        "{{ 'x'.ljust(1000000000000) }}", "{{ {'a': 1} | tojson(indent=1000000000000) }}"}) {
    Outcome o = render(src, l);
    expect_limit(o, RenderLimit::Memory, "allocated more than 64.0 MiB");
  }
}

TEST(RenderLimits, SharedPiecesCannotMultiplyPastTheMemoryBound) {
  RenderLimits l;
  l.max_memory_bytes = 16 << 20;
  // A list of 10^5 references to one 1 MB string is cheap; joining or printing it is not.
  const char* prelude = "{% set s = 'x' * 1000000 %}{% set l = [s] * 100000 %}";
  for (const char* tail : {"{{ l | join }}", "{{ l }}", "{{ l | tojson }}",
                           "{{ s | replace('x', s) }}", "{{ ''.join(l) }}"}) {
    Outcome o = render(std::string(prelude) + tail, l);
    expect_limit(o, RenderLimit::Memory, "allocated more than");
  }
}

TEST(RenderLimits, RecursiveLoopsAndMacrosStopAtTheDepthBound) {
  RenderLimits l;
  l.max_depth = 50;
  ordered_json ctx = {{"items", {{{"children", ordered_json::array()}}}}};
  // A recursive loop that never bottoms out: it used to overflow the stack.
  Outcome o = render("{% for x in items recursive %}{{ loop(items) }}{% endfor %}", l, ctx);
  expect_limit(o, RenderLimit::Depth, "maximum recursion depth exceeded");
  EXPECT_NE(o.error.find("RecursionError"), std::string::npos) << o.error;
  o = render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", l);
  expect_limit(o, RenderLimit::Depth, "more than 50 nested");
  // A recursive loop that does bottom out still renders.
  ordered_json tree = {{"items", {{{"n", 1}, {"children", {{{"n", 2}, {"children", ordered_json::array()}}}}}}}};
  EXPECT_EQ(render("{% for x in items recursive %}{{ x.n }}{% if x.children %}({{ loop(x.children) }})"
                   "{% endif %}{% endfor %}",
                   l, tree)
                .text,
            "1(2)");
}

TEST(RenderLimits, ValuesNestedAMillionDeepNeitherCrashNorPrint) {
  // Building the chain is 10^5 iterations; printing or freeing it recursively would
  // overflow the stack.
  const char* build =
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}"
      "{% endfor %}";
  EXPECT_EQ(render(std::string(build) + "built").text, "built");
  Outcome o = render(std::string(build) + "{{ ns.x }}");
  EXPECT_NE(o.error.find("RecursionError: maximum recursion depth exceeded"), std::string::npos)
      << o.error;
  o = render(std::string(build) + "{{ ns.x == ns.x }}");
  EXPECT_NE(o.error.find("RecursionError"), std::string::npos) << o.error;
  o = render(std::string(build) + "{{ ns.x | tojson }}");
  EXPECT_NE(o.error.find("RecursionError"), std::string::npos) << o.error;
  // Generators wrapping generators: materializing them recursively is bounded too.
  o = render("{% set ns = namespace(g=[1]) %}{% for i in range(100000) %}"
             "{% set ns.g = ns.g | map('string') %}{% endfor %}{{ ns.g | list }}");
  EXPECT_NE(o.error.find("RecursionError"), std::string::npos) << o.error;
}

TEST(RenderLimits, ANamespaceHoldingItselfPrintsWithoutRecursingForever) {
  Outcome o = render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_NE(o.error.find("RecursionError"), std::string::npos) << o.error;
}

TEST(RenderLimits, ACancelFlagEndsARenderInProgress) {
  std::atomic<bool> cancel{false};
  RenderLimits l;
  l.max_iterations = int64_t(1) << 40;  // only the flag can end this one: not the iterations,
  l.max_memory_bytes = SIZE_MAX;         // nor the ranges' bytes counted in total (a fast core
                                         // reached 128 MiB of them inside the 200 ms)
  l.cancel = &cancel;
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  Outcome o = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                     "{% endfor %}",
                     l);
  raiser.join();
  EXPECT_EQ(o.cause, TemplateError::Cause::Cancelled) << o.error;
  EXPECT_NE(o.error.find("cancelled"), std::string::npos) << o.error;
}

TEST(RenderLimits, TheDefaultsLeaveRealTemplatesAlone) {
  // A long conversation through a ChatML-like template: well inside every default bound.
  ordered_json msgs = ordered_json::array();
  for (int i = 0; i < 5000; ++i)
    msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(200, 'w')}});
  Outcome o = render(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n"
      "{% endfor %}",
      {}, {{"messages", msgs}});
  EXPECT_TRUE(o.error.empty()) << o.error;
  EXPECT_GT(o.text.size(), 5000u * 200);
}

}  // namespace limits_test
}  // namespace tandem::jinja
