// The public API: error types and messages the HTTP layer relies on, the clock option,
// and concurrent renders of one parsed template.
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "template/jinja.h"

namespace tandem::jinja {
namespace api_test {

using nlohmann::ordered_json;

std::string error_of(const std::string& source,
                     const ordered_json& context = ordered_json::object()) {
  try {
    Template::parse(source).render(context);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(JinjaApi, RaiseExceptionMessageIsVerbatim) {
  // Gemma-style guard: the HTTP layer returns this text as the 400 message.
  const char* src =
      "{% if messages[0]['role'] == 'system' %}"
      "{{ raise_exception('System role not supported') }}{% endif %}";
  ordered_json ctx = {{"messages", {{{"role", "system"}, {"content", "x"}}}}};
  EXPECT_EQ(error_of(src, ctx), "System role not supported");
}

TEST(JinjaApi, TemplateErrorIsATandemError) {
  try {
    Template::parse("{% if %}");
    FAIL() << "parse should fail";
  } catch (const tandem::Error& e) {
    EXPECT_NE(dynamic_cast<const TemplateError*>(&e), nullptr);
  }
}

TEST(JinjaApi, ParseErrorsCarryTheLine) {
  std::string msg;
  try {
    Template::parse("line 1\nline 2\n{% for x in %}\n");
  } catch (const TemplateError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("TemplateSyntaxError"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
}

TEST(JinjaApi, RenderErrorsCarryTheKindAndLine) {
  std::string msg = error_of("a\n{% set x = 1 %}\n{{ functions + 'x' }}");
  EXPECT_EQ(msg, "UndefinedError: 'functions' is undefined (line 3)");
}

// Python's ints are unbounded, ours are 64 bits: a float past them converts to an
// OverflowError, never to an undefined cast (a fuzzer found `1.6e308|int`).
TEST(JinjaApi, FloatsPastSixtyFourBitsOverflowWhereTheyBecomeIntegers) {
  for (const char* src : {"{{ 1.6e308|int }}", "{{ '1e300'|int }}", "{{ -9.3e18|int }}",
                          "{{ '%d' % 1e300 }}", "{{ 9223372036854775807|round(-19) }}"}) {
    const std::string msg = error_of(src);
    EXPECT_NE(msg.find("OverflowError"), std::string::npos) << src << ": " << msg;
  }
  // The largest and smallest that fit still convert.
  EXPECT_EQ(Template::parse("{{ 9.2e18|int }} {{ -9223372036854775807 - 1 }}|{{ '%d' % "
                            "(-9223372036854775807 - 1) }}")
                .render(ordered_json::object()),
            "9200000000000000000 -9223372036854775808|-9223372036854775808");
}

TEST(JinjaApi, ContextMustBeAnObject) {
  Template t = Template::parse("x");
  EXPECT_THROW(t.render(ordered_json::array({1, 2})), TemplateError);
  EXPECT_EQ(t.render(ordered_json::object()), "x");
}

TEST(JinjaApi, StrftimeNowUsesTheGivenTimeOrTheClock) {
  Template t = Template::parse("{{ strftime_now('%d %b %Y, %H:%M') }}");
  RenderOptions fixed;
  fixed.now = "2026-11-29T12:00:00";
  EXPECT_EQ(t.render(ordered_json::object(), fixed), "29 Nov 2026, 12:00");

  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string year = Template::parse("{{ strftime_now('%Y') }}").render(ordered_json::object());
  EXPECT_EQ(year, std::to_string(local.tm_year + 1900));
}

TEST(JinjaApi, ContextShadowsGlobalsAndTemplateSetsShadowContext) {
  Template t = Template::parse("{{ range }}|{% set bos_token = 'X' %}{{ bos_token }}");
  EXPECT_EQ(t.render({{"range", "mine"}, {"bos_token", "<s>"}}), "mine|X");
}

TEST(JinjaApi, ConcurrentRendersOfOneTemplateAgree) {
  std::ifstream f(std::string(TANDEM_TEST_DATA) + "/chat_templates/Qwen-Qwen3-0.6B.jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  const Template t = Template::parse(ss.str());
  ordered_json ctx = {{"messages",
                       {{{"role", "system"}, {"content", "Be brief."}},
                        {{"role", "user"}, {"content", "Hi"}},
                        {{"role", "assistant"}, {"content", "<think>\nhmm\n</think>\n\nHello!"}},
                        {{"role", "user"}, {"content", "2+2?"}}}},
                      {"add_generation_prompt", true}};
  const std::string expected = t.render(ctx);
  ASSERT_NE(expected.find("<|im_start|>assistant\n"), std::string::npos);

  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 40; ++i) mismatches[k] += t.render(ctx) != expected;
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(mismatches[k], 0) << "thread " << k;
}

TEST(JinjaApi, FilterBlockMustProduceAString) {
  // jinja2 yields a filter block's result without str(), so the final join fails on an int.
  std::string msg = error_of("{% filter length %}abc{% endfilter %}");
  EXPECT_NE(msg.find("expected str instance, int found"), std::string::npos) << msg;
  EXPECT_EQ(Template::parse("{% filter upper %}abc{% endfilter %}").render(ordered_json::object()),
            "ABC");
}

TEST(JinjaApi, DeepMacroRecursionFailsCleanly) {
  std::string msg = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("RecursionError"), std::string::npos) << msg;
}

}  // namespace api_test
}  // namespace tandem::jinja
