// POST /v1/completions.
#include "server/common/api_error.h"
#include "server/common/ids.h"
#include "server/common/prompt_limits.h"
#include "server/common/request_fields.h"
#include "server/common/response_writer.h"
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
  const ModelInfo& info = ctx.model.engine->model_info();
  Json body = parse_request_body(req.body, ctx.limits.json);
  require_served_model(ctx, body);
  CompletionRequest r =
      parse_completion_request(body, ctx.model.defaults, info.vocab_size, ctx.limits);
  CompletionFormat format;
  format.logprobs = r.logprobs;
  format.echo_logprobs = r.echo && r.logprobs >= 0;
  format.return_token_ids = r.return_token_ids;
  format.token_text = token_text_of(ctx.model);
  std::vector<GenerationRequest> requests = build_requests(ctx, r, format);

  ResponseMeta meta{random_id("cmpl-"), unix_time_now(), ctx.model_name};
  auto run = std::make_unique<GenerationRun>(*ctx.model.engine, std::move(requests), &ctx.metrics);
  if (r.stream) {
    auto encoder = std::make_unique<CompletionStreamEncoder>(meta, format, r.include_usage);
    respond_streaming(res, std::move(run), ctx.watch, std::move(encoder), ctx.guard);
  } else {
    respond_when_done(res, *run, ctx.watch, [&](const std::vector<ChoiceResult>& results) {
      return format_completion(meta, format, results);
    });
  }
}

}  // namespace tandem::server
