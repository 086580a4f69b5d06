#include "server/openai/chat_messages.h"

#include <algorithm>
#include <string_view>

#include "server/common/api_error.h"
#include "server/common/bounded_json.h"
#include "server/common/content_parts.h"
#include "server/common/request_fields.h"

namespace tandem::server {
namespace {

bool is_one_of(std::string_view s, std::initializer_list<const char*> options) {
  return std::any_of(options.begin(), options.end(), [&](const char* o) { return s == o; });
}

// A tool call's `arguments` arrive as a JSON string; templates expect the object. The
// string is parsed under the body's own limits: JSON inside a string is still client JSON.
Json arguments_object(const Json& arguments, const std::string& path, const JsonLimits& limits) {
  if (!arguments.is_string()) return arguments;
  JsonParse parsed = parse_bounded_json(arguments.get_ref<const std::string&>(), limits);
  if (parsed.value && parsed.value->is_object()) return std::move(*parsed.value);
  if (!parsed.value && parsed.refusal != JsonRefusal::Malformed)
    invalid_request(path, "'{}' is refused: {}", path, parsed.message);
  return arguments;  // not an object: the template gets the text as it came
}

Json normalize_tool_calls(const Json& calls, const std::string& path, const JsonLimits& limits) {
  if (!calls.is_array())
    invalid_request(path, "'{}' must be an array, got {}", path, json_type_name(calls));
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    FieldReader call(calls[i], item_path(path, i));
    FieldReader fn(call.require("function"), call.name("function"));
    Json c = calls[i];
    c["type"] = call.string("type").value_or("function");
    c["function"]["name"] = fn.require_string("name");
    c["function"]["arguments"] =
        arguments_object(fn.has("arguments") ? fn.require("arguments") : Json::object(),
                         fn.name("arguments"), limits);
    out.push_back(std::move(c));
  }
  return out;
}

Json read_message_content(const Json& content, const std::string& path, const std::string& role,
                          const MessageContent& how) {
  if (how.already_read) return content;
  if (!how.images) return content_text(content, path, {"text", "input_text"});
  const bool user = role == "user";
  ContentKinds kinds{{"text", "input_text"}, "image_url", user ? read_openai_image_part : nullptr};
  return read_content(content, path, kinds, *how.images);
}

Json normalize_openai_message(const Json& message, const std::string& path,
                              const JsonLimits& limits, const MessageContent& how) {
  FieldReader f(message, path);
  std::string role = f.require_string("role");
  if (role == "developer") role = "system";  // OpenAI's newer name; templates know "system"
  if (!is_one_of(role, {"system", "user", "assistant", "tool"}))
    invalid_request(f.name("role"),
                    "'{}' must be one of system, developer, user, assistant, tool; got '{}'",
                    f.name("role"), role);
  Json out = message;
  out["role"] = role;
  bool has_calls = role == "assistant" && f.has("tool_calls");
  if (has_calls)
    out["tool_calls"] = normalize_tool_calls(message["tool_calls"], f.name("tool_calls"), limits);
  if (f.has("content")) {
    out["content"] = read_message_content(message["content"], f.name("content"), role, how);
  } else if (role == "assistant") {
    out["content"] = "";  // as vLLM passes it: templates that concatenate content still work
  } else {
    invalid_request(f.name("content"), "'{}' is a required field for role '{}'", f.name("content"),
                    role);
  }
  if (auto name = f.string("name")) out["name"] = *name;
  if (auto id = f.string("tool_call_id")) out["tool_call_id"] = *id;
  return out;
}

}  // namespace

Json normalize_openai_messages(const Json& messages, const JsonLimits& limits,
                               MessageContent content) {
  if (!messages.is_array())
    invalid_request("messages", "'messages' must be an array, got {}", json_type_name(messages));
  if (messages.empty()) invalid_request("messages", "'messages' must not be empty");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i)
    out.push_back(normalize_openai_message(messages[i], item_path("messages", i), limits, content));
  return out;
}

Json normalize_openai_tools(const Json* tools) {
  if (!tools) return Json();
  if (!tools->is_array())
    invalid_request("tools", "'tools' must be an array, got {}", json_type_name(*tools));
  for (size_t i = 0; i < tools->size(); ++i) {
    FieldReader tool((*tools)[i], item_path("tools", i));
    std::string type = tool.string("type").value_or("function");
    if (type != "function")
      invalid_request(tool.name("type"), "'{}' must be 'function', got '{}'", tool.name("type"),
                      type);
    FieldReader fn(tool.require("function"), tool.name("function"));
    fn.require_string("name");
    fn.string("description");
    fn.object_field("parameters");
  }
  return tools->empty() ? Json() : *tools;
}

ToolForcing openai_tool_forcing(const Json* tool_choice) {
  if (!tool_choice || !tool_choice_allows_calls(tool_choice)) return {};
  if (tool_choice->is_string()) return {.forced = *tool_choice == "required", .name = std::nullopt};
  return {.forced = true, .name = (*tool_choice)["function"]["name"].get<std::string>()};
}

bool tool_choice_allows_calls(const Json* tool_choice) {
  if (!tool_choice) return true;
  if (tool_choice->is_string()) {
    const std::string& s = tool_choice->get_ref<const std::string&>();
    if (s == "none") return false;
    if (s == "auto" || s == "required") return true;
    invalid_request("tool_choice",
                    "'tool_choice' must be none, auto, required or an object; got '{}'", s);
  }
  FieldReader choice(*tool_choice, "tool_choice");
  FieldReader fn(choice.require("function"), choice.name("function"));
  fn.require_string("name");
  return true;
}

}  // namespace tandem::server
