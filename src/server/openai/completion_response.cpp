#include "server/openai/completion_response.h"

#include <nlohmann/json.hpp>

#include "server/common/sse.h"
#include "server/openai/openai_format.h"

namespace tandem::server {
namespace {

Json token_ids(const std::vector<GeneratedToken>& tokens) {
  Json ids = Json::array();
  for (const GeneratedToken& t : tokens) ids.push_back(t.token);
  return ids;
}

Json completion_choice(size_t i, const CompletionFormat& f, const ChoiceResult& r) {
  const std::string& echo = f.echo.empty() ? std::string() : f.echo[i];
  Json logprobs;
  if (f.echo_logprobs) {
    // The prompt's tokens first, the generated ones after them (OpenAI's echo shape).
    size_t offset = 0;
    logprobs = echo_logprobs(f.prompt_ids[i], r.prompt_logprobs, f.logprobs, f.token_text, offset);
    append_logprobs(logprobs, completion_logprobs(r.tokens, f.logprobs, f.token_text, offset));
  } else if (f.logprobs >= 0) {
    size_t offset = echo.size();
    logprobs = completion_logprobs(r.tokens, f.logprobs, f.token_text, offset);
  }
  Json choice = {{"index", i},
                 {"text", echo + r.text},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", openai_finish_reason(r.finish, false)},
                 {"stop_reason", openai_stop_reason(r.matched_stop)}};
  if (f.return_token_ids) {
    choice["prompt_token_ids"] = f.prompt_ids[i];
    choice["token_ids"] = token_ids(r.tokens);
  }
  return choice;
}

}  // namespace

Json format_completion(const ResponseMeta& meta, const CompletionFormat& format,
                       const std::vector<ChoiceResult>& results) {
  Json choices = Json::array();
  TokenUsage usage{.prompt_tokens = format.prompt_tokens};
  std::vector<int> cached;
  for (size_t i = 0; i < results.size(); ++i) {
    choices.push_back(completion_choice(i, format, results[i]));
    usage.completion_tokens += results[i].completion_tokens;
    cached.push_back(results[i].cached_tokens);
  }
  usage.cached_tokens = cached_prompt_tokens(cached, format.choices_per_prompt);
  return {{"id", meta.id},
          {"object", "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", std::move(choices)},
          {"usage", openai_usage(usage)}};
}

CompletionStreamEncoder::CompletionStreamEncoder(ResponseMeta meta, CompletionFormat format,
                                                 bool include_usage)
    : meta_(std::move(meta)),
      format_(std::move(format)),
      include_usage_(include_usage),
      offsets_(format_.prompt_ids.size(), 0),
      num_tokens_(format_.prompt_ids.size(), 0),
      cached_tokens_(format_.prompt_ids.size(), 0) {}

Json CompletionStreamEncoder::chunk_json(Json choice) const {
  return {{"id", meta_.id},
          {"object", "text_completion"},
          {"created", meta_.created},
          {"model", meta_.model},
          {"choices", Json::array({std::move(choice)})}};
}

std::string CompletionStreamEncoder::begin() {
  std::string out;
  for (size_t i = 0; i < offsets_.size(); ++i) {
    const std::string echo = format_.echo.empty() ? std::string() : format_.echo[i];
    offsets_[i] = echo.size();
    if (echo.empty() && !format_.return_token_ids) continue;
    Json choice = {{"index", i}, {"text", echo}, {"logprobs", Json()}, {"finish_reason", Json()}};
    if (format_.return_token_ids) choice["prompt_token_ids"] = format_.prompt_ids[i];
    out += sse_data(chunk_json(std::move(choice)));
  }
  return out;
}

std::string CompletionStreamEncoder::chunk(int index, const StreamChunk& chunk) {
  size_t i = size_t(index);
  num_tokens_[i] += int(chunk.tokens.size());
  if (chunk.text.empty() && chunk.tokens.empty() && !chunk.finish) return {};
  Json logprobs;
  if (format_.logprobs >= 0 && !chunk.tokens.empty())
    logprobs = completion_logprobs(chunk.tokens, format_.logprobs, format_.token_text, offsets_[i]);
  Json finish;
  Json stop_reason;
  if (chunk.finish) {
    finish = openai_finish_reason(*chunk.finish, false);
    if (!chunk.matched_stop.empty()) stop_reason = chunk.matched_stop;
    completion_tokens_ += chunk.completion_tokens > 0 ? chunk.completion_tokens : num_tokens_[i];
    cached_tokens_[i] = chunk.cached_tokens;
  }
  Json choice = {{"index", index},
                 {"text", chunk.text},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", std::move(finish)},
                 {"stop_reason", std::move(stop_reason)}};
  if (format_.return_token_ids) choice["token_ids"] = token_ids(chunk.tokens);
  return sse_data(chunk_json(std::move(choice)));
}

std::string CompletionStreamEncoder::end() {
  return openai_stream_end(
      meta_, "text_completion", include_usage_,
      {format_.prompt_tokens, completion_tokens_,
       cached_prompt_tokens(cached_tokens_, format_.choices_per_prompt)});
}

std::string CompletionStreamEncoder::error(const std::string& message) {
  return openai_stream_error(message);
}

}  // namespace tandem::server
