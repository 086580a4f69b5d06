// The engine requests behind one HTTP request (n choices, or several prompts × n
// choices), read as one sequence of (choice, chunk) events. It times every choice for
// the metrics from chunk arrival, and cancels whatever is unfinished when it is destroyed
// (client gone, server stopping, a formatting error): the engine then frees the blocks.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "server/common/server_metrics.h"

namespace tandem::server {

// How a waiting HTTP thread learns that it should stop waiting.
struct ClientWatch {
  std::function<bool()> connected = [] { return true; };  // false: the client hung up
  std::function<bool()> aborting = [] { return false; };  // true: the server is stopping
  std::chrono::milliseconds poll{20};                     // how often both are asked
};

class GenerationRun {
 public:
  struct Event {
    int choice = 0;
    StreamChunk chunk;
  };

  // Submits every request; choice i is requests[i]. `metrics` may be null.
  GenerationRun(EngineApi& engine, std::vector<GenerationRequest> requests, ServerMetrics* metrics);
  ~GenerationRun();
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  int num_choices() const { return int(choices_.size()); }
  const GenerationRequest& request(int choice) const { return choices_[size_t(choice)].request; }
  bool finished() const { return num_open_ == 0; }

  // The next chunk of any unfinished choice, or nullopt if none came within `timeout`.
  std::optional<Event> next(std::chrono::milliseconds timeout);

  // Waits for the next chunk while the client stays and the server runs; on either
  // failing, cancels the run and returns nullopt.
  std::optional<Event> next(const ClientWatch& watch);

  void cancel();

 private:
  struct Choice {
    GenerationRequest request;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point submitted;
    std::optional<Clock::time_point> first_chunk, last_token;
    bool done = false;
  };
  std::optional<Event> take(size_t i, std::chrono::milliseconds timeout);
  void record(Choice& c, const StreamChunk& chunk);

  ServerMetrics* metrics_;
  std::vector<Choice> choices_;
  size_t round_robin_ = 0;
  int num_open_ = 0;
};

// Everything one choice produced, for a non-streaming response.
struct ChoiceResult {
  std::string text;
  std::vector<GeneratedToken> tokens;
  std::vector<GeneratedToken> prompt_logprobs;  // GenerationRequest::prompt_logprobs
  FinishReason finish = FinishReason::Stop;
  std::string matched_stop;
  std::string error;
  bool server_error = false;  // StreamChunk::server_error
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens read from the prefix cache
  std::vector<float> embedding;  // GenerationRequest::pooling: the pooled vector
};

// Reads the run to its end; nullopt if the client left or the server stopped first.
std::optional<std::vector<ChoiceResult>> collect_results(GenerationRun& run,
                                                         const ClientWatch& watch);

// Folds one chunk into a choice's result.
void append_chunk(ChoiceResult& result, const StreamChunk& chunk);

}  // namespace tandem::server
