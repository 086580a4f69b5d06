// Conversation → prompt text → token ids, the way transformers' apply_chat_template does
// it: the template sees `messages`, `tools` (when given), `add_generation_prompt`, the
// special tokens of tokenizer_config.json (bos_token, eos_token, ...) and any extra
// keyword arguments (`chat_template_kwargs`, e.g. enable_thinking); the rendered text is
// tokenized with add_special_tokens=false, because the template writes BOS itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/common/image_parts.h"
#include "server/common/json_text.h"
#include "server/common/server_limits.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct ChatPromptInput {
  Json messages = Json::array();  // normalized (openai/chat_messages.h, anthropic_messages.h)
  // The images of `messages`, in the order of their {"type": "image"} items (content_parts.h).
  std::vector<ImagePart> images;
  Json tools;                             // null, or OpenAI-style tools
  Json template_kwargs = Json::object();  // extra template variables; override the rest
  bool add_generation_prompt = true;
  // Leave the final (assistant) message open so the model continues it (vLLM's flag).
  bool continue_final_message = false;
  // The time strftime_now formats ("2026-11-29T12:00:00"); unset: the local time now.
  std::optional<std::string> now;
};

// The render bounds of a request: the server's template limits and its stop flag.
jinja::RenderLimits render_limits(const TemplateLimits& limits, const std::atomic<bool>* cancel);

class ChatPromptBuilder {
 public:
  // Parses the model's templates (the default one, and a "tool_use" one if present).
  // Returns null when the model has no chat template; throws jinja::TemplateError for a
  // template that does not parse (a model folder problem, reported at startup).
  static std::shared_ptr<const ChatPromptBuilder> create(
      const TokenizerConfig& config, std::shared_ptr<const Tokenizer> tokenizer);

  // The prompt text; a template that raises (raise_exception, undefined values) or runs
  // past `limits` is a 400 carrying the template's message (and the flag of the limit); a
  // render cancelled by limits.cancel is a 503.
  std::string render(const ChatPromptInput& input, const jinja::RenderLimits& limits = {}) const;
  // render() tokenized without added special tokens.
  std::vector<int32_t> tokens(const ChatPromptInput& input,
                              const jinja::RenderLimits& limits = {}) const;
  std::vector<int32_t> tokenize(const std::string& rendered) const;

 private:
  ChatPromptBuilder() = default;
  Json base_context() const;

  std::optional<jinja::Template> default_template_;
  std::optional<jinja::Template> tool_template_;
  Json special_tokens_ = Json::object();  // bos_token, eos_token, ... as strings
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace tandem::server
