#include "server/common/generation_run.h"

#include "server/common/model_names.h"

#include <algorithm>

namespace tandem::server {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Sharing the wait among several streams: short slices, so no choice waits on another.
constexpr std::chrono::milliseconds kMultiStreamSlice{2};

}  // namespace

GenerationRun::GenerationRun(EngineApi& engine, std::vector<GenerationRequest> requests,
                             ServerMetrics* metrics)
    : metrics_(metrics) {
  choices_.reserve(requests.size());
  try {
    for (GenerationRequest& r : requests) {
      select_model(engine, r);
      Choice c;
      c.request = r;
      c.submitted = Clock::now();
      c.stream = engine.submit(std::move(r));
      choices_.push_back(std::move(c));
      ++num_open_;
    }
  } catch (...) {
    cancel();  // no destructor runs for a half-built run: stop what was submitted
    throw;
  }
}

GenerationRun::~GenerationRun() {
  cancel();
}

void GenerationRun::cancel() {
  for (Choice& c : choices_) {
    if (c.done) continue;
    c.stream->cancel();
    c.done = true;
    --num_open_;
    if (metrics_) metrics_->count_finished(FinishReason::Cancelled);
  }
}

void GenerationRun::record(Choice& c, const StreamChunk& chunk) {
  Clock::time_point now = Clock::now();
  if (!metrics_) return;
  // Queue time ends at the first chunk of any kind: an engine that announces admission
  // with an empty chunk gets an exact figure; otherwise it equals time to first token.
  if (!c.first_chunk) {
    c.first_chunk = now;
    metrics_->observe_queue_time(seconds_between(c.submitted, now));
  }
  size_t n = chunk.tokens.size();
  if (n > 0) {
    if (!c.last_token) {
      metrics_->observe_time_to_first_token(seconds_between(c.submitted, now));
    } else {
      // Tokens that arrive together share the gap since the previous chunk.
      double gap = seconds_between(*c.last_token, now) / double(n);
      for (size_t i = 0; i < n; ++i) metrics_->observe_inter_token_latency(gap);
    }
    c.last_token = now;
    metrics_->count_generated(int64_t(n));
  }
  if (chunk.finish) {
    metrics_->observe_e2e_latency(seconds_between(c.submitted, now));
    metrics_->count_finished(*chunk.finish);
  }
}

std::optional<GenerationRun::Event> GenerationRun::take(size_t i,
                                                        std::chrono::milliseconds timeout) {
  Choice& c = choices_[i];
  std::optional<StreamChunk> chunk = c.stream->pop(timeout);
  if (!chunk) return std::nullopt;
  record(c, *chunk);
  if (chunk->finish) {
    c.done = true;
    --num_open_;
  }
  return Event{int(i), std::move(*chunk)};
}

std::optional<GenerationRun::Event> GenerationRun::next(std::chrono::milliseconds timeout) {
  if (finished()) return std::nullopt;
  size_t n = choices_.size();
  if (num_open_ == 1) {
    for (size_t i = 0; i < n; ++i)
      if (!choices_[i].done) return take(i, timeout);
  }
  Clock::time_point deadline = Clock::now() + timeout;
  do {
    for (size_t k = 0; k < n; ++k) {
      size_t i = (round_robin_ + k) % n;
      if (choices_[i].done) continue;
      if (auto e = take(i, std::chrono::milliseconds(0))) {
        round_robin_ = i + 1;
        return e;
      }
    }
    // Nothing ready: sleep on one stream for a slice, then look at all again.
    for (size_t k = 0; k < n; ++k) {
      size_t i = (round_robin_ + k) % n;
      if (choices_[i].done) continue;
      if (auto e = take(i, kMultiStreamSlice)) {
        round_robin_ = i + 1;
        return e;
      }
      break;
    }
  } while (Clock::now() < deadline);
  return std::nullopt;
}

std::optional<GenerationRun::Event> GenerationRun::next(const ClientWatch& watch) {
  while (!finished()) {
    if (watch.aborting() || !watch.connected()) {
      cancel();
      return std::nullopt;
    }
    if (auto e = next(watch.poll)) return e;
  }
  return std::nullopt;
}

void append_chunk(ChoiceResult& result, const StreamChunk& chunk) {
  result.text += chunk.text;
  result.tokens.insert(result.tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
  if (!chunk.prompt_logprobs.empty()) result.prompt_logprobs = chunk.prompt_logprobs;
  if (!chunk.embedding.empty()) result.embedding = chunk.embedding;
  if (!chunk.finish) return;
  result.finish = *chunk.finish;
  result.matched_stop = chunk.matched_stop;
  result.error = chunk.error;
  result.server_error = chunk.server_error;
  result.prompt_tokens = chunk.prompt_tokens;
  result.cached_tokens = chunk.cached_tokens;
  result.completion_tokens =
      chunk.completion_tokens > 0 ? chunk.completion_tokens : int(result.tokens.size());
}

std::optional<std::vector<ChoiceResult>> collect_results(GenerationRun& run,
                                                         const ClientWatch& watch) {
  std::vector<ChoiceResult> results(size_t(run.num_choices()));
  while (!run.finished()) {
    auto event = run.next(watch);
    if (!event) return std::nullopt;
    append_chunk(results[size_t(event->choice)], event->chunk);
  }
  return results;
}

}  // namespace tandem::server
