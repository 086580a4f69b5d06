#include "server/anthropic/messages_request.h"

#include "server/anthropic/anthropic_messages.h"
#include "server/common/api_error.h"
#include "server/common/generation_fields.h"
#include "server/common/sampling_fields.h"

namespace tandem::server {
namespace {

// {"type": "auto" | "any" | "tool" | "none", "name"?}; false for "none".
bool anthropic_tool_choice_allows_calls(const FieldReader& f) {
  const Json* choice = f.object_field("tool_choice");
  if (!choice) return true;
  FieldReader c(*choice, "tool_choice");
  std::string type = c.require_string("type");
  if (type == "tool") c.require_string("name");
  if (type == "none") return false;
  if (type != "auto" && type != "any" && type != "tool")
    invalid_request(c.name("type"), "'{}' must be auto, any, tool or none; got '{}'",
                    c.name("type"), type);
  return true;
}

ToolForcing anthropic_tool_forcing(const FieldReader& f) {
  const Json* choice = f.object_field("tool_choice");
  if (!choice) return {};
  FieldReader c(*choice, "tool_choice");
  std::string type = c.require_string("type");
  if (type == "any") return {.forced = true, .name = std::nullopt};
  if (type == "tool") return {.forced = true, .name = c.require_string("name")};
  return {};
}

// thinking {"type": "enabled", "budget_tokens": N} | {"type": "disabled"} | {"type":
// "adaptive"}: turns the template's thinking on or off (enable_thinking, and DeepSeek
// V3.x's `thinking`, unless chat_template_kwargs sets them) and bounds it. Absent or
// adaptive: the template's default.
void read_thinking(const FieldReader& f, ChatGeneration& out) {
  const Json* thinking = f.object_field("thinking");
  if (!thinking) return;
  FieldReader t(*thinking, "thinking");
  std::string type = t.require_string("type");
  if (type == "adaptive") return;
  if (type != "enabled" && type != "disabled")
    invalid_request(t.name("type"), "'{}' must be enabled, disabled or adaptive; got '{}'",
                    t.name("type"), type);
  const bool on = type == "enabled";
  if (on) {
    t.require("budget_tokens");
    out.thinking_budget = t.integer("budget_tokens", 1, kMaxTokensLimit);
  }
  Json& kwargs = out.prompt.template_kwargs;
  for (const char* key : {"enable_thinking", "thinking"})
    if (!kwargs.contains(key)) kwargs[key] = on;
}

}  // namespace

void read_anthropic_conversation(const FieldReader& f, ChatGeneration& out) {
  const Json* system = f.has("system") ? &f.object()["system"] : nullptr;
  out.prompt.messages =
      anthropic_to_chat_messages(system, f.require("messages"), &out.prompt.images);
  Json tools = anthropic_tools_to_chat(f.array_field("tools"));
  bool allowed = anthropic_tool_choice_allows_calls(f);
  offer_tools(std::move(tools), allowed, anthropic_tool_forcing(f), out);
  read_prompt_options(f, out.prompt);
  read_thinking(f, out);
}

MessagesRequest parse_messages_request(const Json& body, const GenerationRequest& defaults,
                                       int vocab_size, const RequestLimits& limits) {
  FieldReader f(body);
  MessagesRequest out;
  start_generation(f, defaults, out);
  read_anthropic_conversation(f, out);
  f.require("max_tokens");
  out.max_tokens = read_max_tokens(f, "max_tokens");
  out.stream = f.boolean("stream").value_or(false);
  f.object_field("metadata");
  SamplingFieldSpec spec = sampling_spec(limits, "stop_sequences");
  spec.max_temperature = 1.0;
  read_sampling_fields(f, spec, vocab_size, out.generation);
  return out;
}

}  // namespace tandem::server
