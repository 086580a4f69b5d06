// POST /v1/completions: completion_request's parser and completion_response's format in
// the generation pipeline (common/generation_endpoint.h). Its prompts are texts or token
// ids, several at once, so it does steps 4 to 7 itself, for each prompt.
#include "server/common/generation_endpoint.h"
#include "server/common/prompt_limits.h"
#include "server/common/sampling_fields.h"
#include "server/endpoints.h"
#include "server/openai/completion_request.h"
#include "server/openai/completion_response.h"

namespace tandem::server {
namespace {

// Every prompt tokenized and fitted to the context, then n choices each, in OpenAI's
// order (all choices of prompt 0 first).
std::vector<GenerationRequest> build_requests(const EndpointContext& ctx,
                                              const CompletionRequest& r,
                                              CompletionFormat& format) {
  const ModelInfo& info = ctx.model.engine->model_info();
  const Tokenizer& tok = *ctx.model.tokenizer;
  std::vector<GenerationRequest> requests;
  int64_t total_tokens = 0;
  format.choices_per_prompt = r.n;
  GenerationRequest constrained = r.generation;
  attach_grammar(*ctx.model.grammars, r.constraint, constrained);  // once for every prompt
  for (const CompletionPrompt& p : r.prompts) {
    GenerationRequest g = constrained;
    if (p.text) check_prompt_length(p.text->size(), ctx.model.prompt_bound, info, "prompt");
    g.prompt = p.text ? tok.encode(*p.text, r.add_special_tokens) : p.ids;
    total_tokens += int64_t(g.prompt.size()) * r.n;
    check_request_tokens(total_tokens, ctx.limits, "prompt");
    fit_to_context(g, info, r.max_tokens, kDefaultCompletionMaxTokens, {"prompt", "max_tokens"});
    format.prompt_tokens += int(g.prompt.size());
    std::string echo;
    if (r.echo) echo = p.text ? *p.text : tok.decode(g.prompt, /*skip_special_tokens=*/false);
    for (GenerationRequest& choice : expand_choices(g, r.n)) {
      format.echo.push_back(echo);
      format.prompt_ids.push_back(choice.prompt);
      requests.push_back(std::move(choice));
    }
  }
  return requests;
}

}  // namespace

void handle_completions(const EndpointContext& ctx, const httplib::Request& req,
                        httplib::Response& res) {
  serve_generation(ctx, req, res, [&](const Json& body) {
    CompletionRequest r = parse_completion_request(
        body, ctx.model.defaults, ctx.model.engine->model_info().vocab_size, ctx.limits);
    CompletionFormat format;
    format.logprobs = r.logprobs;
    format.echo_logprobs = r.echo && r.logprobs >= 0;
    format.return_token_ids = r.return_token_ids;
    format.token_text = token_text_of(ctx.model);
    GenerationPlan plan{"cmpl-", build_requests(ctx, r, format)};
    answer_with<CompletionStreamEncoder>(plan, r.stream, std::move(format), format_completion,
                                         r.include_usage);
    return plan;
  });
}

}  // namespace tandem::server
