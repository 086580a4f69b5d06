// Conversation → prompt text → token ids, the way transformers' apply_chat_template does
// it: the template sees `messages`, `tools` (when given), `add_generation_prompt`, the
// special tokens of tokenizer_config.json (bos_token, eos_token, ...) and any extra
// keyword arguments (`chat_template_kwargs`, e.g. enable_thinking), which may not replace
// those (reserved_template_variables: a 400 naming the key); the rendered text is
// tokenized with add_special_tokens=false, because the template writes BOS itself.
// Special-token text in what the client sent stays text (special_text.h) unless the
// request turns that off.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/common/image_parts.h"
#include "server/common/json_text.h"
#include "server/common/server_limits.h"
#include "server/common/special_text.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct ChatPromptInput {
  Json messages = Json::array();  // normalized (openai/chat_messages.h, anthropic_messages.h)
  // The images of `messages`, in the order of their {"type": "image"} items (content_parts.h).
  std::vector<ImagePart> images;
  Json tools;                             // null, or OpenAI-style tools
  Json template_kwargs = Json::object();  // extra template variables (never the reserved ones)
  bool add_generation_prompt = true;
  // Leave the final (assistant) message open so the model continues it (vLLM's flag).
  bool continue_final_message = false;
  // The time strftime_now formats ("2026-11-29T12:00:00"); unset: the local time now.
  std::optional<std::string> now;
  // Special-token text in messages, tools and kwargs is tokenized as text (false: as the
  // control tokens it spells, as vLLM does; the request's `split_special_tokens`).
  bool split_special_tokens = true;
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

  // The prompt; a template that raises (raise_exception, undefined values) or runs past
  // `limits` is a 400 carrying the template's message (and the flag of the limit); a render
  // cancelled by limits.cancel is a 503; a reserved variable in template_kwargs is a 400.
  RenderedPrompt render_prompt(const ChatPromptInput& input,
                               const jinja::RenderLimits& limits = {}) const;
  std::string render(const ChatPromptInput& input, const jinja::RenderLimits& limits = {}) const {
    return render_prompt(input, limits).text;
  }
  // render_prompt() tokenized without added special tokens.
  std::vector<int32_t> tokens(const ChatPromptInput& input,
                              const jinja::RenderLimits& limits = {}) const;
  std::vector<int32_t> tokenize(const RenderedPrompt& rendered) const;

  // The variables chat_template_kwargs may not set: messages, tools, add_generation_prompt,
  // the template's helpers (raise_exception, strftime_now) and every special-token variable
  // of tokenizer_config.json (bos_token, eos_token, ...).
  std::vector<std::string> reserved_template_variables() const;

 private:
  ChatPromptBuilder() = default;
  void check_kwargs(const Json& kwargs) const;
  Json context_of(const ChatPromptInput& input, std::vector<std::string>* originals) const;

  std::optional<jinja::Template> default_template_;
  std::optional<jinja::Template> tool_template_;
  Json special_tokens_ = Json::object();  // bos_token, eos_token, ... as strings
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const SpecialTextGuard> guard_;
};

}  // namespace tandem::server
