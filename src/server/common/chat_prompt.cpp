#include "server/common/chat_prompt.h"

#include "server/common/api_error.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace tandem::server {
namespace {

// "sep_token": "<sep>" or {"content": "<sep>", ...}: the string, or nullopt.
std::optional<std::string> token_string(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

// transformers' special_tokens_map: every "*_token" field of tokenizer_config.json.
Json special_tokens_of(const TokenizerConfig& config) {
  Json out = Json::object();
  if (config.raw().is_object())
    for (auto it = config.raw().begin(); it != config.raw().end(); ++it)
      if (it.key().ends_with("_token"))
        if (auto s = token_string(it.value())) out[it.key()] = *s;
  auto set = [&](const char* key, const std::optional<std::string>& v) {
    if (v) out[key] = *v;
  };
  set("bos_token", config.bos_token);
  set("eos_token", config.eos_token);
  set("pad_token", config.pad_token);
  set("unk_token", config.unk_token);
  return out;
}

// Strips the end of the rendered conversation after the final message's text, so that
// generation continues that message (transformers' continue_final_message).
std::string cut_after_final_message(const std::string& rendered, const Json& messages) {
  const Json& last = messages.back();
  std::string content;
  if (last.contains("content") && last["content"].is_string()) {
    content = last["content"].get<std::string>();
  } else if (last.contains("content") && last["content"].is_array()) {
    for (const Json& item : last["content"])  // with images: its last text item
      if (item.value("type", "") == "text") content = item.value("text", "");
  }
  size_t begin = content.find_first_not_of(" \t\r\n");
  size_t end = content.find_last_not_of(" \t\r\n");
  std::string core = begin == std::string::npos ? "" : content.substr(begin, end - begin + 1);
  size_t at = core.empty() ? std::string::npos : rendered.rfind(core);
  if (at == std::string::npos)
    invalid_request("continue_final_message",
                    "the final message's content was not found in the rendered prompt");
  return rendered.substr(0, at + core.size());
}

const char* flag_of(jinja::RenderLimit limit) {
  switch (limit) {
    case jinja::RenderLimit::Iterations:
      return "--max-template-iterations";
    case jinja::RenderLimit::Output:
      return "--max-template-output";
    case jinja::RenderLimit::Memory:
      return "--max-template-memory";
    case jinja::RenderLimit::Depth:
      return "--max-template-depth";
  }
  return "";
}

[[noreturn]] void render_failed(const jinja::TemplateError& e) {
  if (e.cause() == jinja::TemplateError::Cause::Cancelled) throw shutting_down_error();
  if (e.cause() == jinja::TemplateError::Cause::Limit && e.limit())
    throw ApiError(
        400, "invalid_request_error",
        fmt::format("The chat template was stopped: {} ({})", e.what(), flag_of(*e.limit())),
        "messages", "template_limit_exceeded");
  invalid_request("messages", "The chat template failed: {}", e.what());
}

}  // namespace

jinja::RenderLimits render_limits(const TemplateLimits& limits, const std::atomic<bool>* cancel) {
  jinja::RenderLimits out;
  out.max_iterations = limits.max_iterations;
  out.max_output_bytes = limits.max_output_bytes;
  out.max_memory_bytes = limits.max_memory_bytes;
  out.max_depth = limits.max_depth;
  out.cancel = cancel;
  return out;
}

std::shared_ptr<const ChatPromptBuilder> ChatPromptBuilder::create(
    const TokenizerConfig& config, std::shared_ptr<const Tokenizer> tokenizer) {
  auto tool_it = config.named_templates.find("tool_use");
  if (!config.chat_template && tool_it == config.named_templates.end()) return nullptr;
  std::shared_ptr<ChatPromptBuilder> b(new ChatPromptBuilder());
  if (config.chat_template) b->default_template_ = jinja::Template::parse(*config.chat_template);
  if (tool_it != config.named_templates.end())
    b->tool_template_ = jinja::Template::parse(tool_it->second);
  b->special_tokens_ = special_tokens_of(config);
  if (tokenizer) b->guard_ = std::make_shared<const SpecialTextGuard>(*tokenizer);
  b->tokenizer_ = std::move(tokenizer);
  return b;
}

std::vector<std::string> ChatPromptBuilder::reserved_template_variables() const {
  std::vector<std::string> out = {"messages",        "tools",        "add_generation_prompt",
                                  "raise_exception", "strftime_now", "bos_token",
                                  "eos_token",       "pad_token",    "unk_token"};
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it)
    if (std::find(out.begin(), out.end(), it.key()) == out.end()) out.push_back(it.key());
  return out;
}

// chat_template_kwargs may add variables, not replace the ones the server validated or the
// model's own (a client's `messages` there would bypass every check on messages).
void ChatPromptBuilder::check_kwargs(const Json& kwargs) const {
  if (kwargs.empty()) return;
  const std::vector<std::string> reserved = reserved_template_variables();
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
    if (std::find(reserved.begin(), reserved.end(), it.key()) != reserved.end())
      invalid_request("chat_template_kwargs." + it.key(),
                      "'chat_template_kwargs.{}' is reserved: the server sets '{}' itself "
                      "(reserved: {})",
                      it.key(), it.key(), fmt::join(reserved, ", "));
}

// The template's variables; with `originals`, the client's strings have their special-token
// text marked (special_text.h) and the texts marked are appended there.
Json ChatPromptBuilder::context_of(const ChatPromptInput& input,
                                   std::vector<std::string>* originals) const {
  auto client = [&](const Json& value) {
    return originals ? guard_->mark(value, *originals) : value;
  };
  Json context = special_tokens_;
  context["messages"] = client(input.messages);
  if (input.tools.is_array() && !input.tools.empty()) context["tools"] = client(input.tools);
  context["add_generation_prompt"] = input.add_generation_prompt;
  for (auto it = input.template_kwargs.begin(); it != input.template_kwargs.end(); ++it)
    context[it.key()] = client(it.value());
  return context;
}

RenderedPrompt ChatPromptBuilder::render_prompt(const ChatPromptInput& input,
                                                const jinja::RenderLimits& limits) const {
  if (input.messages.empty()) invalid_request("messages", "'messages' must not be empty");
  if (input.continue_final_message && input.add_generation_prompt)
    invalid_request("continue_final_message",
                    "continue_final_message and add_generation_prompt cannot both be true");
  check_kwargs(input.template_kwargs);
  bool with_tools = input.tools.is_array() && !input.tools.empty();
  // transformers picks the "tool_use" template when tools are given and it exists.
  const jinja::Template& tmpl =
      (with_tools && tool_template_) || !default_template_ ? *tool_template_ : *default_template_;
  std::vector<std::string> originals;
  const bool guarded = input.split_special_tokens && guard_;
  Json context = context_of(input, guarded ? &originals : nullptr);
  std::string text;
  try {
    text = tmpl.render(context, jinja::RenderOptions{input.now, limits});
  } catch (const jinja::TemplateError& e) {
    render_failed(e);
  }
  RenderedPrompt out = SpecialTextGuard::unmark(text, originals);
  if (input.continue_final_message) {
    out.text = cut_after_final_message(out.text, input.messages);
    std::erase_if(out.plain,
                  [&](const RenderedPrompt::Span& s) { return s.begin >= out.text.size(); });
    if (!out.plain.empty()) out.plain.back().end = std::min(out.plain.back().end, out.text.size());
  }
  return out;
}

std::vector<int32_t> ChatPromptBuilder::tokens(const ChatPromptInput& input,
                                               const jinja::RenderLimits& limits) const {
  return tokenize(render_prompt(input, limits));
}

std::vector<int32_t> ChatPromptBuilder::tokenize(const RenderedPrompt& rendered) const {
  return SpecialTextGuard::tokenize(*tokenizer_, rendered);
}

}  // namespace tandem::server
