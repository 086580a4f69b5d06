#include "server/common/endpoint_context.h"

#include "server/common/api_error.h"
#include "server/common/prompt_limits.h"
#include "server/common/request_fields.h"
#include "server/common/request_images.h"

namespace tandem::server {

Json read_request_body(const EndpointContext& ctx, const httplib::Request& req) {
  Json body = parse_request_body(req.body, ctx.limits.json);
  require_served_model(ctx, body);
  return body;
}

void require_served_model(const EndpointContext& ctx, const Json& body) {
  auto it = body.find("model");
  if (it == body.end() || !it->is_string()) return;  // absent (or a 400 from the field reader)
  const std::string& name = it->get_ref<const std::string&>();
  if (!accepts_model_name(ctx.model, ctx.model_name, name)) throw model_not_found(name);
}

ApiError model_not_found(const std::string& name) {
  return ApiError(404, "invalid_request_error", fmt::format("The model '{}' does not exist", name),
                  "model", "model_not_found");
}

TokenText token_text_of(const ServedModel& model) {
  std::shared_ptr<const Tokenizer> tok = model.tokenizer;
  return [tok](int32_t id) { return tok->decode(std::span<const int32_t>(&id, 1), false); };
}

const ChatPromptBuilder& chat_builder(const ServedModel& model) {
  if (!model.chat)
    invalid_request("messages",
                    "This model has no chat template; use /v1/completions with a "
                    "text or token-id prompt");
  return *model.chat;
}

jinja::RenderLimits request_render_limits(const EndpointContext& ctx) {
  return render_limits(ctx.limits.chat_template, ctx.cancel);
}

ChatPromptTokens chat_prompt_tokens(const EndpointContext& ctx, const ChatPromptInput& prompt,
                                    const char* field, bool for_generation) {
  const ChatPromptBuilder& builder = chat_builder(ctx.model);
  const ServedImages& served = ctx.model.images;
  std::vector<ProcessedImage> images =
      process_request_images(served, prompt.images, ctx.limits.media, ctx.limits.media_fetch);
  RenderedPrompt rendered = builder.render_prompt(prompt, request_render_limits(ctx));
  if (served.takes_images) expand_image_markers(rendered, *served.processor, images, field);
  if (for_generation)
    check_prompt_length(rendered.text.size(), ctx.model.prompt_bound,
                        ctx.model.engine->model_info(), field);
  ChatPromptTokens out;
  out.ids = builder.tokenize(rendered);
  if (!images.empty()) out.media = image_spans(out.ids, served.soft_token_id, images);
  out.text = std::move(rendered.text);
  return out;
}

void reply_json(httplib::Response& res, const Json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

}  // namespace tandem::server
