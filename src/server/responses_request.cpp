#include "server/responses_request.h"

#include <limits>

#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/chat_request.h"
#include "server/openai_fields.h"
#include "server/sampling_fields.h"

namespace tandem::server {
namespace {

constexpr int64_t kMaxTokensLimit = std::numeric_limits<int32_t>::max();

Json input_message(const Json& item, const std::string& path) {
  FieldReader f(item, path);
  std::string type = f.string("type").value_or("message");
  if (type != "message")
    invalid_request(f.name("type"), "'{}' item type '{}' is not supported (only messages)",
                    f.name("type"), type);
  std::string role = f.require_string("role");
  if (role == "developer") role = "system";
  if (role != "user" && role != "assistant" && role != "system")
    invalid_request(f.name("role"), "'{}' must be user, assistant, system or developer; got '{}'",
                    f.name("role"), role);
  std::string text =
      content_text(f.require("content"), f.name("content"), {"input_text", "output_text", "text"});
  return {{"role", role}, {"content", text}};
}

Json read_input(const FieldReader& f) {
  Json messages = Json::array();
  if (auto instructions = f.string("instructions"))
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  const Json& input = f.require("input");
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
  } else if (input.is_array()) {
    if (input.empty()) invalid_request("input", "'input' must not be empty");
    for (size_t i = 0; i < input.size(); ++i)
      messages.push_back(input_message(input[i], fmt::format("input[{}]", i)));
  } else {
    invalid_request("input", "'input' must be a string or a list of messages, got {}",
                    json_type_name(input));
  }
  return messages;
}

void refuse_unsupported(const FieldReader& f) {
  if (const Json* tools = f.array_field("tools"); tools && !tools->empty())
    invalid_request("tools",
                    "'tools' are not supported on /v1/responses yet; use "
                    "/v1/chat/completions");
  if (f.has("previous_response_id"))
    invalid_request("previous_response_id",
                    "'previous_response_id' is not supported: responses are not stored");
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body, const GenerationRequest& defaults,
                                         int vocab_size, const RequestLimits& limits) {
  FieldReader f(body);
  ResponsesRequest out;
  out.generation = defaults;
  out.generation.lora = f.string("model");  // an adapter or not: select_model() decides
  refuse_unsupported(f);
  out.prompt.messages = read_input(f);
  out.prompt.template_kwargs = read_template_kwargs(f);
  out.max_output_tokens = f.integer("max_output_tokens", 1, kMaxTokensLimit);
  out.stream = f.boolean("stream").value_or(false);
  if (const Json* text = f.object_field("text"))
    out.constraint = {read_text_format(FieldReader(*text, "text")), "text.format"};
  read_sampling_fields(f, sampling_spec(limits), vocab_size, out.generation);
  for (const char* key : {"instructions", "max_output_tokens", "temperature", "top_p", "metadata"})
    out.echo[key] = f.has(key) ? body[key] : Json();
  if (out.echo["metadata"].is_null()) out.echo["metadata"] = Json::object();
  return out;
}

}  // namespace tandem::server
