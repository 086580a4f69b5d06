// POST /v1/embeddings: each input tokenized and checked against the context and the
// request's limits, submitted to the engine as a prompt-only request that pools
// (GenerationRequest::pooling: the served model's --pooling), and answered in OpenAI's
// shape once every input's vector is back (truncated to `dimensions`, then normalized).
// Not a generation route (common/generation_endpoint.h): nothing is sampled or streamed.
#include "server/common/endpoint_context.h"
#include "server/common/ids.h"
#include "server/common/prompt_limits.h"
#include "server/common/response_writer.h"
#include "server/endpoints.h"
#include "server/openai/embeddings_request.h"
#include "server/openai/embeddings_response.h"

namespace tandem::server {
namespace {

[[noreturn]] void too_long(const ModelInfo& info, int64_t tokens, const char* what) {
  throw ApiError(400, "invalid_request_error",
                 fmt::format("This model's maximum context length is {} tokens. However, you "
                             "requested {} {} in the input for embedding generation. Please "
                             "reduce the length of the input.",
                             info.max_model_len, tokens, what),
                 "input", "context_length_exceeded");
}

// Input i's tokens: a text tokenized (refused first when its length alone shows it cannot
// fit), or the ids; the last truncate_prompt_tokens kept when asked.
std::vector<int32_t> input_tokens(const EndpointContext& ctx, const EmbeddingsRequest& r,
                                  const PromptInput& input) {
  const ModelInfo& info = ctx.model.engine->model_info();
  std::vector<int32_t> ids = input.ids;
  if (input.text) {
    const int64_t at_least = ctx.model.prompt_bound.min_tokens(input.text->size());
    if (!r.truncate_prompt_tokens && at_least > info.max_model_len)
      too_long(info, at_least, "tokens at least");
    ids = ctx.model.tokenizer->encode(*input.text, r.add_special_tokens);
  }
  if (r.truncate_prompt_tokens && int64_t(ids.size()) > *r.truncate_prompt_tokens)
    ids.erase(ids.begin(), ids.end() - *r.truncate_prompt_tokens);
  if (ids.empty()) invalid_request("input", "An input has no tokens: there is nothing to embed");
  if (int64_t(ids.size()) > info.max_model_len) too_long(info, int64_t(ids.size()), "tokens");
  return ids;
}

std::vector<GenerationRequest> engine_requests(const EndpointContext& ctx,
                                               const EmbeddingsRequest& r) {
  std::vector<GenerationRequest> out;
  int64_t total = 0;
  for (const PromptInput& input : r.inputs) {
    GenerationRequest g;
    g.prompt = input_tokens(ctx, r, input);
    total += int64_t(g.prompt.size());
    check_request_tokens(total, ctx.limits, "input");
    g.max_tokens = 0;
    g.pooling = ctx.model.pooling;
    g.lora = r.model;  // select_model keeps it only when it names an adapter
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

void handle_embeddings(const EndpointContext& ctx, const httplib::Request& req,
                       httplib::Response& res) {
  const EmbeddingsRequest r = parse_embeddings_request(read_request_body(ctx, req),
                                                       ctx.model.engine->model_info(), ctx.limits);
  GenerationRun run(*ctx.model.engine, engine_requests(ctx, r), &ctx.metrics);
  std::optional<std::vector<ChoiceResult>> results = collect_results(run, ctx.watch);
  if (!results) {
    if (ctx.watch.aborting()) throw shutting_down_error();
    return mark_client_gone(res);
  }
  EmbeddingsMeta meta{random_id("embd-"), unix_time_now(), ctx.model_name, 0, r.base64};
  std::vector<std::vector<float>> vectors;
  for (ChoiceResult& c : *results) {
    if (c.finish == FinishReason::Error) throw_engine_error(c.error, true, c.server_error);
    if (c.embedding.empty()) throw internal_error("An input's embedding did not come back.");
    meta.prompt_tokens += c.prompt_tokens;
    vectors.push_back(client_embedding(std::move(c.embedding), r.dimensions, r.normalize));
  }
  res.status = 200;
  res.set_content(embeddings_body(meta, vectors), "application/json");
}

}  // namespace tandem::server
