#include "server/common/generation_fields.h"

namespace tandem::server {

void start_generation(const FieldReader& f, const GenerationRequest& defaults,
                      GenerationFields& out) {
  out.generation = defaults;
  out.generation.lora = f.string("model");
}

std::optional<int64_t> read_max_tokens(const FieldReader& f, std::string_view key, int64_t min) {
  return f.integer(key, min, kMaxTokensLimit);
}

Json read_template_kwargs(const FieldReader& f) {
  Json kwargs = Json::object();
  if (auto thinking = f.boolean("enable_thinking")) kwargs["enable_thinking"] = *thinking;
  if (const Json* extra = f.object_field("chat_template_kwargs"))
    for (auto it = extra->begin(); it != extra->end(); ++it) kwargs[it.key()] = it.value();
  return kwargs;
}

void read_prompt_options(const FieldReader& f, ChatPromptInput& out) {
  out.template_kwargs = read_template_kwargs(f);
  out.split_special_tokens = f.boolean("split_special_tokens").value_or(true);
}

void offer_tools(Json tools, bool allowed, const ToolForcing& forcing, ChatGeneration& out) {
  if (allowed) out.prompt.tools = std::move(tools);
  out.parse_tool_calls = allowed && !out.prompt.tools.is_null();
  out.forced_tools = forcing;
}

}  // namespace tandem::server
