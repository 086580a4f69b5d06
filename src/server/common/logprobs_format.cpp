#include "server/common/logprobs_format.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace tandem::server {
namespace {

Json utf8_bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(int(c));
  return bytes;
}

Json chat_entry(int32_t token, float logprob, const TokenText& token_text) {
  std::string text = token_text(token);
  return {{"token", text}, {"logprob", finite_logprob(logprob)}, {"bytes", utf8_bytes(text)}};
}

size_t top_count(const GeneratedToken& t, int top_n) {
  return std::min(t.top_logprobs.size(), size_t(std::max(top_n, 0)));
}

// {text: logprob} of the token's alternatives (the first of two with the same text).
Json top_object(const GeneratedToken& t, int top_n, const TokenText& token_text) {
  Json top = Json::object();
  for (size_t k = 0; k < top_count(t, top_n); ++k) {
    std::string alt = token_text(t.top_logprobs[k].token);
    if (!top.contains(alt)) top[alt] = finite_logprob(t.top_logprobs[k].logprob);
  }
  return top;
}

}  // namespace

float finite_logprob(float logprob) {
  return std::isfinite(logprob) ? std::max(logprob, -9999.f) : -9999.f;
}

Json chat_logprobs_content(std::span<const GeneratedToken> tokens, int top_n,
                           const TokenText& token_text) {
  Json content = Json::array();
  for (const GeneratedToken& t : tokens) {
    Json entry = chat_entry(t.token, t.logprob, token_text);
    Json top = Json::array();
    for (size_t k = 0; k < top_count(t, top_n); ++k)
      top.push_back(chat_entry(t.top_logprobs[k].token, t.top_logprobs[k].logprob, token_text));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return content;
}

Json echo_logprobs(std::span<const int32_t> prompt, std::span<const GeneratedToken> scored,
                   int top_n, const TokenText& token_text, size_t& offset) {
  Json texts = Json::array(), logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  for (size_t p = 0; p < prompt.size(); ++p) {
    std::string text = token_text(prompt[p]);
    texts.push_back(text);
    offsets.push_back(offset);
    offset += text.size();
    if (p == 0 || p > scored.size()) {
      logprobs.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    logprobs.push_back(finite_logprob(scored[p - 1].logprob));
    tops.push_back(top_object(scored[p - 1], top_n, token_text));
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

void append_logprobs(Json& a, Json b) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (Json& v : b[key]) a[key].push_back(std::move(v));
}

Json completion_logprobs(std::span<const GeneratedToken> tokens, int top_n,
                         const TokenText& token_text, size_t& offset) {
  Json texts = Json::array(), logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  for (const GeneratedToken& t : tokens) {
    std::string text = token_text(t.token);
    texts.push_back(text);
    logprobs.push_back(finite_logprob(t.logprob));
    offsets.push_back(offset);
    offset += text.size();
    tops.push_back(top_object(t, top_n, token_text));
  }
  return {{"tokens", std::move(texts)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace tandem::server
