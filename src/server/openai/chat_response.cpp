#include "server/openai/chat_response.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/common/sse.h"

namespace tandem::server {
namespace {

Json generated_ids(const std::vector<GeneratedToken>& tokens) {
  Json ids = Json::array();
  for (const GeneratedToken& t : tokens) ids.push_back(t.token);
  return ids;
}

// The reasoning fields of a message or delta: `reasoning_content` (DeepSeek's and vLLM's
// name, which most clients read) and `reasoning` (vLLM's newer one).
void set_reasoning(Json& message, const std::string& reasoning) {
  Json value = reasoning.empty() ? Json() : Json(reasoning);
  message["reasoning_content"] = value;
  message["reasoning"] = std::move(value);
}

Json chat_choice(int index, const ChatFormat& format, const ChoiceResult& r) {
  Json message = {{"role", "assistant"}};
  AnswerParts answer = split_answer(r.text, format.reasoning, format.parse_tool_calls);
  const bool has_calls = !answer.calls.empty();
  message["content"] = has_calls && answer.content.empty() ? Json() : Json(answer.content);
  if (format.reasoning.on()) set_reasoning(message, answer.reasoning);
  if (has_calls) {
    Json calls = Json::array();
    for (const ToolCall& c : answer.calls) calls.push_back(openai_tool_call(c));
    message["tool_calls"] = std::move(calls);
  }
  Json logprobs;
  if (format.top_logprobs >= 0)
    logprobs = {
        {"content", chat_logprobs_content(r.tokens, format.top_logprobs, format.token_text)}};
  Json choice = {{"index", index},
                 {"message", std::move(message)},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", openai_finish_reason(r.finish, has_calls)},
                 {"stop_reason", openai_stop_reason(r.matched_stop)}};
  if (format.return_token_ids) choice["token_ids"] = generated_ids(r.tokens);
  return choice;
}

}  // namespace

Json format_chat_completion(const ResponseMeta& meta, const ChatFormat& format,
                            const std::vector<ChoiceResult>& results) {
  Json choices = Json::array();
  TokenUsage usage{.prompt_tokens = format.prompt_tokens};
  for (size_t i = 0; i < results.size(); ++i) {
    choices.push_back(chat_choice(int(i), format, results[i]));
    usage.completion_tokens += results[i].completion_tokens;
    usage.cached_tokens = std::max(usage.cached_tokens, results[i].cached_tokens);  // one prompt
  }
  Json out = {
      {"id", meta.id},       {"object", "chat.completion"},   {"created", meta.created},
      {"model", meta.model}, {"choices", std::move(choices)}, {"usage", openai_usage(usage)}};
  if (format.return_token_ids) out["prompt_token_ids"] = format.prompt_ids;
  return out;
}

ChatStreamEncoder::ChatStreamEncoder(ResponseMeta meta, ChatFormat format, int num_choices,
                                     bool include_usage)
    : meta_(std::move(meta)), format_(std::move(format)), include_usage_(include_usage) {
  for (int i = 0; i < num_choices; ++i)
    choices_.push_back({AnswerStream(format_.reasoning, format_.parse_tool_calls)});
}

Json ChatStreamEncoder::chunk_json(int choice, Json delta, Json logprobs,
                                   Json finish_reason) const {
  Json c = {{"index", choice},
            {"delta", std::move(delta)},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", std::move(finish_reason)}};
  return {{"id", meta_.id},
          {"object", "chat.completion.chunk"},
          {"created", meta_.created},
          {"model", meta_.model},
          {"choices", Json::array({std::move(c)})}};
}

std::string ChatStreamEncoder::begin() {
  std::string out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Json c = chunk_json(int(i), {{"role", "assistant"}, {"content", ""}}, Json(), Json());
    if (format_.return_token_ids && i == 0) c["prompt_token_ids"] = format_.prompt_ids;
    out += sse_data(c);
  }
  return out;
}

// A chunk's deltas in order: reasoning, content, then each call whole. The chunk's
// logprobs and token ids ride on its first delta (on an empty content delta when it has
// none yet).
std::string ChatStreamEncoder::deltas(int choice, const AnswerParts& parts, Json logprobs,
                                      Json token_ids) {
  ChoiceState& state = choices_[size_t(choice)];
  std::string out;
  auto emit = [&](Json delta) {
    Json c = chunk_json(choice, std::move(delta), std::move(logprobs), Json());
    if (!token_ids.is_null()) c["choices"][0]["token_ids"] = std::move(token_ids);
    logprobs = Json();
    token_ids = Json();
    out += sse_data(c);
  };
  if (!parts.reasoning.empty()) {
    Json delta = Json::object();
    set_reasoning(delta, parts.reasoning);
    emit(std::move(delta));
  }
  if (!parts.content.empty() || !logprobs.is_null() || !token_ids.is_null())
    emit({{"content", parts.content}});
  for (const ToolCall& call : parts.calls) {
    Json tc = openai_tool_call(call, state.num_calls++);
    out += sse_data(chunk_json(choice, {{"tool_calls", Json::array({tc})}}, Json(), Json()));
  }
  return out;
}

std::string ChatStreamEncoder::chunk(int choice, const StreamChunk& chunk) {
  ChoiceState& state = choices_[size_t(choice)];
  state.num_tokens += int(chunk.tokens.size());
  Json logprobs;
  if (format_.top_logprobs >= 0 && !chunk.tokens.empty())
    logprobs = {
        {"content", chat_logprobs_content(chunk.tokens, format_.top_logprobs, format_.token_text)}};
  Json token_ids;
  if (format_.return_token_ids && !chunk.tokens.empty()) token_ids = generated_ids(chunk.tokens);
  std::string out =
      deltas(choice, state.answer.take(chunk), std::move(logprobs), std::move(token_ids));
  if (chunk.finish) {
    completion_tokens_ += chunk.completion_tokens > 0 ? chunk.completion_tokens : state.num_tokens;
    cached_tokens_ = std::max(cached_tokens_, chunk.cached_tokens);
    Json c = chunk_json(choice, Json::object(), Json(),
                        openai_finish_reason(*chunk.finish, state.num_calls > 0));
    c["choices"][0]["stop_reason"] = openai_stop_reason(chunk.matched_stop);
    out += sse_data(c);
  }
  return out;
}

std::string ChatStreamEncoder::end() {
  return openai_stream_end(meta_, "chat.completion.chunk", include_usage_,
                           {format_.prompt_tokens, completion_tokens_, cached_tokens_});
}

std::string ChatStreamEncoder::error(const std::string& message) {
  return openai_stream_error(message);
}

}  // namespace tandem::server
