// libFuzzer target: the 66 real chat templates (tests/data/chat_templates) rendered with
// contexts built from the fuzzer's bytes: conversations of any roles and contents, tool
// calls with argument objects, tools, flags and extra variables. A template may raise
// (raise_exception, undefined values, a RenderLimits bound: a TemplateError, which the
// server turns into a 400); nothing else may escape, and nothing may crash.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "template/jinja.h"

namespace {

using nlohmann::ordered_json;
using tandem::jinja::Template;

const std::vector<Template>& templates() {
  static std::vector<Template> all = [] {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(tandem::fuzz::data_dir() +
                                                              "/chat_templates"))
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<Template> out;
    for (const auto& f : files) {
      std::ifstream in(f);
      std::stringstream ss;
      ss << in.rdbuf();
      out.push_back(Template::parse(ss.str()));
    }
    return out;
  }();
  return all;
}

ordered_json scalar(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange(0, 5)) {
    case 0: return nullptr;
    case 1: return p.ConsumeBool();
    case 2: return p.ConsumeIntegral<int64_t>();
    case 3: return p.ConsumeFloatingPoint<double>();
    default: return p.ConsumeRandomLengthString(64);
  }
}

ordered_json value(FuzzedDataProvider& p, int depth) {
  if (depth > 3 || p.ConsumeBool()) return scalar(p);
  ordered_json v = p.ConsumeBool() ? ordered_json::array() : ordered_json::object();
  int n = p.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < n; ++i) {
    if (v.is_array()) {
      v.push_back(value(p, depth + 1));
    } else {
      v[p.ConsumeRandomLengthString(16)] = value(p, depth + 1);
    }
  }
  return v;
}

ordered_json message(FuzzedDataProvider& p) {
  static const char* kRoles[] = {"system", "user", "assistant", "tool", "developer", "ipython"};
  ordered_json m = {{"role", kRoles[p.ConsumeIntegralInRange<size_t>(0, 5)]}};
  if (p.ConsumeIntegralInRange(0, 7) != 0) m["content"] = p.ConsumeRandomLengthString(200);
  if (p.ConsumeIntegralInRange(0, 3) == 0) {
    ordered_json call = {{"id", p.ConsumeRandomLengthString(12)},
                         {"type", "function"},
                         {"function",
                          {{"name", p.ConsumeRandomLengthString(16)},
                           {"arguments", value(p, 1)}}}};
    m["tool_calls"] = ordered_json::array({call});
  }
  if (p.ConsumeIntegralInRange(0, 5) == 0) m["tool_call_id"] = p.ConsumeRandomLengthString(12);
  if (p.ConsumeIntegralInRange(0, 7) == 0) m["reasoning_content"] = p.ConsumeRandomLengthString(64);
  return m;
}

ordered_json context(FuzzedDataProvider& p) {
  ordered_json ctx = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  ordered_json messages = ordered_json::array();
  int n = p.ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < n; ++i) messages.push_back(message(p));
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = p.ConsumeBool();
  if (p.ConsumeBool()) {
    ordered_json tool = {{"type", "function"},
                         {"function",
                          {{"name", p.ConsumeRandomLengthString(16)},
                           {"description", p.ConsumeRandomLengthString(40)},
                           {"parameters", value(p, 1)}}}};
    ctx["tools"] = ordered_json::array({tool});
  }
  if (p.ConsumeBool()) ctx["enable_thinking"] = p.ConsumeBool();
  if (p.ConsumeBool()) ctx[p.ConsumeRandomLengthString(16)] = value(p, 0);
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  const auto& all = templates();
  const Template& t = all[p.ConsumeIntegralInRange<size_t>(0, all.size() - 1)];
  tandem::jinja::RenderOptions options;
  options.now = "2026-01-02T03:04:05";
  options.limits.max_iterations = 200000;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_memory_bytes = 32 << 20;
  ordered_json ctx = context(p);
  try {
    t.render(ctx, options);
  } catch (const tandem::jinja::TemplateError& e) {
    if (std::string_view(e.what()).find("internal error") != std::string_view::npos)
      tandem::fuzz::fail("a template render hit an internal error", e.what());
  }
  return 0;
}
