#include "server/anthropic/anthropic_messages.h"

#include "server/common/api_error.h"
#include "server/common/content_parts.h"
#include "server/common/request_fields.h"

namespace tandem::server {
namespace {

// One turn's blocks, sorted into what the template needs.
struct TurnParts {
  ContentBuilder content;             // text and (user turns) image blocks, in order
  Json tool_calls = Json::array();    // assistant tool_use blocks
  Json tool_results = Json::array();  // user tool_result blocks, as "tool" messages
};

Json tool_use_call(const FieldReader& block) {
  const Json* input = block.object_field("input");
  return {
      {"id", block.require_string("id")},
      {"type", "function"},
      {"function",
       {{"name", block.require_string("name")}, {"arguments", input ? *input : Json::object()}}}};
}

Json tool_result_message(const FieldReader& block) {
  std::string content;
  if (block.has("content"))
    content = content_text(block.require("content"), block.name("content"), {"text"});
  return {{"role", "tool"},
          {"tool_call_id", block.require_string("tool_use_id")},
          {"content", content}};
}

void add_block(const Json& block_json, const std::string& path, const std::string& role,
               TurnParts& parts, std::vector<ImagePart>* images) {
  FieldReader block(block_json, path);
  std::string type = block.require_string("type");
  if (type == "text") {
    parts.content.add_text(block.require_string("text"));
  } else if (type == "image") {
    if (role != "user" || !images) refuse_image_here(block.name("type"), type);
    images->push_back(read_anthropic_image_block(block_json, path));
    parts.content.add_image();
  } else if (type == "tool_use" && role == "assistant") {
    parts.tool_calls.push_back(tool_use_call(block));
  } else if (type == "tool_result" && role == "user") {
    parts.tool_results.push_back(tool_result_message(block));
  } else if (type == "thinking" || type == "redacted_thinking") {
    // Earlier reasoning is not replayed into the prompt.
  } else {
    invalid_request(block.name("type"), "'{}' block type '{}' is not supported in a {} turn",
                    block.name("type"), type, role);
  }
}

void add_turn(const Json& message, const std::string& path, Json& out,
              std::vector<ImagePart>* images) {
  FieldReader f(message, path);
  std::string role = f.require_string("role");
  if (role != "user" && role != "assistant")
    invalid_request(f.name("role"), "'{}' must be 'user' or 'assistant', got '{}'", f.name("role"),
                    role);
  const Json& content = f.require("content");
  TurnParts parts;
  if (content.is_string()) {
    parts.content.add_text(content.get<std::string>());
  } else if (content.is_array()) {
    for (size_t i = 0; i < content.size(); ++i)
      add_block(content[i], item_path(f.name("content"), i), role, parts, images);
  } else {
    invalid_request(f.name("content"), "'{}' must be a string or a list of blocks, got {}",
                    f.name("content"), json_type_name(content));
  }
  for (Json& result : parts.tool_results) out.push_back(std::move(result));
  Json text = parts.content.content();
  if (role == "assistant" && !parts.tool_calls.empty()) {
    out.push_back({{"role", "assistant"},
                   {"content", std::move(text)},
                   {"tool_calls", std::move(parts.tool_calls)}});
  } else if (parts.content.has_image() || !text.get_ref<const std::string&>().empty() ||
             parts.tool_results.empty()) {
    out.push_back({{"role", role}, {"content", std::move(text)}});
  }
}

}  // namespace

Json anthropic_to_chat_messages(const Json* system, const Json& messages,
                                std::vector<ImagePart>* images) {
  Json out = Json::array();
  if (system) {
    std::string text = content_text(*system, "system", {"text"});
    if (!text.empty()) out.push_back({{"role", "system"}, {"content", text}});
  }
  if (!messages.is_array())
    invalid_request("messages", "'messages' must be an array, got {}", json_type_name(messages));
  if (messages.empty()) invalid_request("messages", "'messages' must not be empty");
  for (size_t i = 0; i < messages.size(); ++i)
    add_turn(messages[i], item_path("messages", i), out, images);
  return out;
}

Json anthropic_tools_to_chat(const Json* tools) {
  if (!tools) return Json();
  if (!tools->is_array())
    invalid_request("tools", "'tools' must be an array, got {}", json_type_name(*tools));
  Json out = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    FieldReader tool((*tools)[i], item_path("tools", i));
    Json fn = {{"name", tool.require_string("name")}};
    if (auto d = tool.string("description")) fn["description"] = *d;
    const Json* schema = tool.object_field("input_schema");
    fn["parameters"] = schema ? *schema : Json{{"type", "object"}, {"properties", Json::object()}};
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out.empty() ? Json() : out;
}

}  // namespace tandem::server
