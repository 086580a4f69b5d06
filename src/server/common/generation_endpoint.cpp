#include "server/common/generation_endpoint.h"

#include "server/common/api_error.h"
#include "server/common/ids.h"
#include "server/common/reasoning_setup.h"
#include "server/common/response_writer.h"

namespace tandem::server {

namespace {

// The thinking budget as the engine takes it; a 400 when it names a field the model cannot
// honour (no reasoning parser).
std::optional<int> thinking_budget(const EndpointContext& ctx, const ChatGeneration& r) {
  if (!r.thinking_budget) return std::nullopt;
  if (!ctx.model.reasoning && !r.budget_field.empty())
    invalid_request(r.budget_field,
                    "'{}' needs a reasoning parser, and this server runs without one "
                    "(tandem serve --reasoning-parser)",
                    r.budget_field);
  return int(*r.thinking_budget);
}

}  // namespace

void prepare_chat_generation(const EndpointContext& ctx, ChatGeneration& r,
                             const PromptFieldNames& names, int num_choices) {
  const std::optional<int> budget = thinking_budget(ctx, r);
  attach_grammar(*ctx.model.grammars, r.constraint, r.forced_tools, r.prompt.tools,
                 ctx.model.tool_format, r.generation);
  ChatPromptTokens prompt = chat_prompt_tokens(ctx, r.prompt, names.prompt);
  r.generation.prompt = std::move(prompt.ids);
  r.generation.media = std::move(prompt.media);
  if (num_choices > 0)
    check_request_tokens(int64_t(r.generation.prompt.size()) * num_choices, ctx.limits, "n");
  const ServedReasoning* reasoning = ctx.model.reasoning ? &*ctx.model.reasoning : nullptr;
  r.reasoning = prepare_thinking(reasoning, prompt.text, budget, r.generation);
  fit_to_context(r.generation, ctx.model.engine->model_info(), r.max_tokens, std::nullopt, names);
}

void serve_generation(const EndpointContext& ctx, const httplib::Request& req,
                      httplib::Response& res, const GenerationBuilder& build) {
  GenerationPlan plan = build(read_request_body(ctx, req));
  ResponseMeta meta{random_id(plan.id_prefix), unix_time_now(), ctx.model_name};
  auto run =
      std::make_unique<GenerationRun>(*ctx.model.engine, std::move(plan.requests), &ctx.metrics);
  if (plan.encoder) {
    respond_streaming(res, std::move(run), ctx.watch, plan.encoder(meta), ctx.guard);
  } else {
    respond_when_done(res, *run, ctx.watch, [&](const std::vector<ChoiceResult>& results) {
      return plan.format(meta, results);
    });
  }
}

}  // namespace tandem::server
