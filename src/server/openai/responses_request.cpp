#include "server/openai/responses_request.h"

#include "server/common/api_error.h"
#include "server/common/content_parts.h"
#include "server/common/generation_fields.h"
#include "server/common/sampling_fields.h"
#include "server/openai/chat_messages.h"
#include "server/openai/openai_fields.h"

namespace tandem::server {
namespace {

// A message item, its content in the template's shape; input_image parts of user turns
// go to `images`.
Json message_item(const FieldReader& f, std::vector<ImagePart>& images) {
  std::string role = f.require_string("role");
  if (role == "developer") role = "system";
  if (role != "user" && role != "assistant" && role != "system")
    invalid_request(f.name("role"), "'{}' must be user, assistant, system or developer; got '{}'",
                    f.name("role"), role);
  ContentKinds kinds{{"input_text", "output_text", "text"},
                     "input_image",
                     role == "user" ? read_responses_image_part : nullptr};
  return {{"role", role},
          {"content", read_content(f.require("content"), f.name("content"), kinds, images)}};
}

// A function_call item as the assistant tool call it records (OpenAI chat shape).
Json function_call(const FieldReader& f) {
  return {{"id", f.require_string("call_id")},
          {"type", "function"},
          {"function", {{"name", f.require_string("name")}, {"arguments", f.require_string("arguments")}}}};
}

Json function_call_output(const FieldReader& f) {
  const Json& output = f.require("output");
  std::string text = output.is_string()
                         ? output.get<std::string>()
                         : content_text(output, f.name("output"), {"input_text", "output_text", "text"});
  return {{"role", "tool"}, {"tool_call_id", f.require_string("call_id")}, {"content", text}};
}

// The input items as chat messages; consecutive function calls are one assistant turn.
void add_input_item(const Json& item, const std::string& path, Json& messages,
                    std::vector<ImagePart>& images) {
  FieldReader f(item, path);
  std::string type = f.string("type").value_or("message");
  if (type == "message") {
    messages.push_back(message_item(f, images));
  } else if (type == "function_call") {
    Json call = function_call(f);
    Json& last = messages.empty() ? messages : messages.back();
    if (!messages.empty() && last["role"] == "assistant" && last.contains("tool_calls"))
      last["tool_calls"].push_back(std::move(call));
    else
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", Json::array({call})}});
  } else if (type == "function_call_output") {
    messages.push_back(function_call_output(f));
  } else {
    invalid_request(f.name("type"),
                    "'{}' item type '{}' is not supported (message, function_call, "
                    "function_call_output)",
                    f.name("type"), type);
  }
}

Json read_input(const FieldReader& f, const JsonLimits& limits, std::vector<ImagePart>& images) {
  Json messages = Json::array();
  if (auto instructions = f.string("instructions"))
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  const Json& input = f.require("input");
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
  } else if (input.is_array()) {
    if (input.empty()) invalid_request("input", "'input' must not be empty");
    for (size_t i = 0; i < input.size(); ++i)
      add_input_item(input[i], item_path("input", i), messages, images);
  } else {
    invalid_request("input", "'input' must be a string or a list of items, got {}",
                    json_type_name(input));
  }
  return normalize_openai_messages(messages, limits, {.images = nullptr, .already_read = true});
}

// Responses function tools ({"type": "function", "name", "description", "parameters",
// "strict"}) in the chat shape the template, the tool-call grammar and the parser take.
Json read_tools(const FieldReader& f) {
  const Json* tools = f.array_field("tools");
  if (tools == nullptr || tools->empty()) return Json();
  Json chat = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    FieldReader t((*tools)[i], item_path("tools", i));
    std::string type = t.require_string("type");
    if (type != "function")
      invalid_request(t.name("type"), "'{}' tool type '{}' is not supported (only function tools)",
                      t.name("type"), type);
    Json fn = {{"name", t.require_string("name")}};
    for (const char* key : {"description", "parameters", "strict"})
      if (t.has(key)) fn[key] = (*tools)[i][key];
    chat.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return normalize_openai_tools(&chat);
}

// tool_choice "auto" | "none" | "required" | {"type": "function", "name"}, in the chat shape.
Json read_tool_choice(const FieldReader& f) {
  if (!f.has("tool_choice")) return Json();
  const Json& choice = f.object()["tool_choice"];
  if (choice.is_string()) return choice;
  FieldReader c(choice, "tool_choice");
  std::string type = c.require_string("type");
  if (type != "function")
    invalid_request("tool_choice", "'tool_choice' type '{}' is not supported (auto, none, "
                    "required or a function)", type);
  return {{"type", "function"}, {"function", {{"name", c.require_string("name")}}}};
}

void read_tool_fields(const FieldReader& f, ResponsesRequest& out) {
  Json tools = read_tools(f);
  Json choice = read_tool_choice(f);
  const Json* choice_ptr = choice.is_null() ? nullptr : &choice;
  const bool no_tools = tools.is_null();
  offer_tools(std::move(tools), tool_choice_allows_calls(choice_ptr),
              openai_tool_forcing(choice_ptr), out);
  if (out.forced_tools.forced && no_tools)
    invalid_request("tool_choice", "'tool_choice' forces a tool call, but 'tools' is empty");
  f.boolean("parallel_tool_calls");
}

void refuse_unsupported(const FieldReader& f) {
  if (f.has("previous_response_id"))
    invalid_request("previous_response_id",
                    "'previous_response_id' is not supported: responses are not stored");
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits) {
  FieldReader f(body);
  ResponsesRequest out;
  start_generation(f, defaults, out);
  refuse_unsupported(f);
  out.prompt.messages = read_input(f, limits.json, out.prompt.images);
  read_tool_fields(f, out);
  read_prompt_options(f, out.prompt);
  out.max_tokens = read_max_tokens(f, "max_output_tokens");
  out.thinking_budget = f.integer("thinking_token_budget", 0, kMaxTokensLimit);
  out.budget_field = "thinking_token_budget";
  out.stream = f.boolean("stream").value_or(false);
  if (const Json* text = f.object_field("text"))
    out.constraint = {read_text_format(FieldReader(*text, "text")), "text.format"};
  read_sampling_fields(f, sampling_spec(limits), vocab_size, out.generation);
  for (const char* key : {"instructions", "max_output_tokens", "temperature", "top_p", "metadata",
                          "tools", "tool_choice", "parallel_tool_calls"})
    out.echo[key] = f.has(key) ? body[key] : Json();
  if (out.echo["metadata"].is_null()) out.echo["metadata"] = Json::object();
  if (out.echo["tools"].is_null()) out.echo["tools"] = Json::array();
  if (out.echo["tool_choice"].is_null()) out.echo["tool_choice"] = "auto";
  if (out.echo["parallel_tool_calls"].is_null()) out.echo["parallel_tool_calls"] = true;
  return out;
}

}  // namespace tandem::server
