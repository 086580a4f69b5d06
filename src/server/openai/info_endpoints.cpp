// GET /v1/models[/{id}], POST /tokenize and /detokenize (vLLM's shapes).
#include "server/common/api_error.h"
#include "server/common/generation_fields.h"
#include "server/common/ids.h"
#include "server/common/prompt_limits.h"
#include "server/common/request_fields.h"
#include "server/endpoints.h"
#include "server/openai/chat_messages.h"

namespace tandem::server {
namespace {

// The base model's card (parent null), or an adapter's: its root is its folder and its
// parent the base model (vLLM's shape).
Json model_card(const EndpointContext& ctx, const std::string& id, const std::string& root,
                const Json& parent) {
  return {{"id", id},
          {"object", "model"},
          {"created", unix_time_now()},
          {"owned_by", "tandem"},
          {"root", root},
          {"parent", parent},
          {"max_model_len", ctx.model.engine->model_info().max_model_len},
          {"weight_format", ctx.model.card.value("weight_format", std::string())},
          {"input_modalities",
           ctx.model.images.takes_images ? Json::array({"text", "image"}) : Json::array({"text"})}};
}

Json model_cards(const EndpointContext& ctx) {
  Json cards = Json::array({model_card(ctx, ctx.model_name, ctx.model_name, Json())});
  for (auto& [name, dir] : ctx.model.engine->lora_adapters())
    cards.push_back(model_card(ctx, name, dir, ctx.model_name));
  return cards;
}

std::vector<int32_t> tokenize_body(const EndpointContext& ctx, const FieldReader& f) {
  if (f.has("messages")) {
    ChatPromptInput prompt;
    prompt.messages = normalize_openai_messages(f.require("messages"), ctx.limits.json,
                                                {.images = &prompt.images});
    prompt.tools = normalize_openai_tools(f.array_field("tools"));
    read_prompt_options(f, prompt);
    prompt.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
    return chat_prompt_tokens(ctx, prompt, "messages", false).ids;
  }
  std::string text = f.require_string("prompt");
  return ctx.model.tokenizer->encode(text, f.boolean("add_special_tokens").value_or(true));
}

}  // namespace

void handle_models(const EndpointContext& ctx, const httplib::Request& req,
                   httplib::Response& res) {
  if (req.matches.size() > 1) {
    std::string id = req.matches[1];
    if (!accepts_model_name(ctx.model, ctx.model_name, id)) throw model_not_found(id);
    for (const Json& card : model_cards(ctx))
      if (card["id"] == id) return reply_json(res, card);
    throw model_not_found(id);
  }
  reply_json(res, {{"object", "list"}, {"data", model_cards(ctx)}});
}

void handle_tokenize(const EndpointContext& ctx, const httplib::Request& req,
                     httplib::Response& res) {
  Json body = read_request_body(ctx, req);
  std::vector<int32_t> ids = tokenize_body(ctx, FieldReader(body));
  reply_json(res, {{"tokens", ids},
                   {"count", ids.size()},
                   {"max_model_len", ctx.model.engine->model_info().max_model_len}});
}

void handle_detokenize(const EndpointContext& ctx, const httplib::Request& req,
                       httplib::Response& res) {
  Json body = read_request_body(ctx, req);
  FieldReader f(body);
  f.require("tokens");
  std::vector<int32_t> ids;
  for (int64_t id : f.integer_list("tokens", INT32_MIN, INT32_MAX)) ids.push_back(int32_t(id));
  check_token_ids(ids, ctx.model.tokenizer->vocab_size(), "tokens");
  reply_json(res, {{"prompt", ctx.model.tokenizer->decode(ids, false)}});
}

}  // namespace tandem::server
