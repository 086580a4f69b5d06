#include "eval/teacher_forced_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "engine/teacher_forcing.h"
#include "eval/request_tokens.h"
#include "model/config.h"

namespace tandem::eval {

namespace {

constexpr int kChunk = 512;  // tokens per forward step of a teacher-forced run

struct TokenScore {
  double logprob;
  bool is_argmax;
};

// ln softmax(row)[token] in f64, and whether token is the row's (first) argmax.
TokenScore score_token(std::span<const float> row, int32_t token) {
  size_t best = 0;
  for (size_t i = 1; i < row.size(); i++)
    if (row[i] > row[best]) best = i;
  double max = row[best], sum = 0;
  for (float x : row) sum += std::exp(double(x) - max);
  return {double(row[size_t(token)]) - max - std::log(sum), best == size_t(token)};
}

std::span<const float> logits_row(const Tensor& logits, int64_t row) {
  return {logits.ptr<float>() + row * logits.cols(), size_t(logits.cols())};
}

size_t argmax(std::span<const float> row) {
  return size_t(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

TeacherForcedScorer::TeacherForcedScorer(Model& model, Backend& backend,
                                         std::shared_ptr<const Tokenizer> tokenizer)
    : model_(model), backend_(backend), tokenizer_(std::move(tokenizer)) {
  TANDEM_CHECK(tokenizer_ != nullptr, "the scorer needs a tokenizer");
}

int TeacherForcedScorer::max_length() const {
  int n = model_.config().max_position_embeddings;
  return n > 0 ? n : std::numeric_limits<int>::max();
}

Loglikelihood TeacherForcedScorer::score_tokens(std::span<const int32_t> context,
                                                std::span<const int32_t> continuation) {
  TANDEM_CHECK(!context.empty() && !continuation.empty(), "empty context or continuation");
  // The last continuation token is only predicted, never fed.
  size_t fed_limit = size_t(max_length());
  if (continuation.size() >= fed_limit)
    fail("a continuation of {} tokens does not fit the model's context of {}", continuation.size(),
         fed_limit);
  size_t num_context = std::min(context.size(), fed_limit - (continuation.size() - 1));
  std::vector<int32_t> ids(context.end() - std::ptrdiff_t(num_context), context.end());
  ids.insert(ids.end(), continuation.begin(), continuation.end() - 1);
  Tensor logits = teacher_forced_logits(model_, backend_, ids, kChunk);
  Loglikelihood r;
  r.greedy = true;
  for (size_t j = 0; j < continuation.size(); j++) {
    TokenScore s = score_token(logits_row(logits, int64_t(num_context + j - 1)), continuation[j]);
    r.logprob += s.logprob;
    r.greedy = r.greedy && s.is_argmax;
  }
  r.num_tokens = int(continuation.size());
  return r;
}

std::vector<Loglikelihood> TeacherForcedScorer::loglikelihood(
    std::span<const LoglikelihoodRequest> requests) {
  std::vector<Loglikelihood> out;
  out.reserve(requests.size());
  for (const LoglikelihoodRequest& r : requests) {
    RequestTokens t = request_tokens(*tokenizer_, r.context, r.continuation);
    out.push_back(score_tokens(t.context, t.continuation));
  }
  return out;
}

std::string TeacherForcedScorer::generate_one(const GenerateRequest& request) {
  std::vector<int32_t> ids = tokenizer_->encode(request.prompt, true);
  if (ids.empty()) fail("the prompt '{}' has no tokens", request.prompt);
  const std::vector<int32_t>& eos = model_.config().eos_token_ids;
  std::vector<int32_t> generated;
  std::string text;
  for (int step = 0; step < request.max_tokens && int(ids.size()) < max_length(); step++) {
    Tensor logits = teacher_forced_logits(model_, backend_, ids, kChunk);
    int32_t next = int32_t(argmax(logits_row(logits, logits.rows() - 1)));
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    ids.push_back(next);
    generated.push_back(next);
    text = tokenizer_->decode(generated, /*skip_special_tokens=*/true);
    size_t cut = std::string::npos;
    for (const std::string& s : request.stop) cut = std::min(cut, text.find(s));
    if (cut != std::string::npos) return text.substr(0, cut);
  }
  return text;
}

std::vector<std::string> TeacherForcedScorer::generate(std::span<const GenerateRequest> requests) {
  std::vector<std::string> out;
  out.reserve(requests.size());
  for (const GenerateRequest& r : requests) out.push_back(generate_one(r));
  return out;
}

std::vector<WindowNll> TeacherForcedScorer::rolling_nll(std::string_view text,
                                                        std::optional<int> window,
                                                        std::optional<size_t> max_windows) {
  std::vector<int32_t> ids = tokenizer_->encode(text, /*add_special_tokens=*/false);
  size_t length = size_t(window.value_or(max_length()));
  TANDEM_CHECK(length >= 2 && length <= size_t(max_length()), "window {} (model context {})",
               length, max_length());
  std::vector<WindowNll> out;
  for (size_t start = 0; start + 1 < ids.size(); start += length) {
    if (max_windows && out.size() == *max_windows) break;
    std::span<const int32_t> chunk(ids.data() + start, std::min(length, ids.size() - start));
    Tensor logits = teacher_forced_logits(model_, backend_, chunk.first(chunk.size() - 1), kChunk);
    WindowNll w;
    for (size_t t = 0; t + 1 < chunk.size(); t++)
      w.total_nll -= score_token(logits_row(logits, int64_t(t)), chunk[t + 1]).logprob;
    w.num_scored = int64_t(chunk.size() - 1);
    out.push_back(w);
  }
  if (out.empty()) fail("perplexity needs a text of at least 2 tokens (got {})", ids.size());
  return out;
}

}  // namespace tandem::eval
