// A scripted EngineApi for the server tests: it records every request and answers each
// with the chunks its script gives, either at once or paced from a thread (so that tests
// can hang up mid-stream and see the cancellation arrive).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine_api.h"

namespace tandem::server::testing {

// A chunk with `text` and one token per id.
inline StreamChunk text_chunk(std::string text, std::vector<int32_t> ids = {}) {
  StreamChunk c;
  c.text = std::move(text);
  for (int32_t id : ids) c.tokens.push_back(GeneratedToken{id, -0.5f, {}});
  return c;
}

inline StreamChunk final_chunk(FinishReason reason, int prompt_tokens, int completion_tokens,
                               std::string text = {}, std::string matched_stop = {}) {
  StreamChunk c;
  c.text = std::move(text);
  c.finish = reason;
  c.prompt_tokens = prompt_tokens;
  c.completion_tokens = completion_tokens;
  c.matched_stop = std::move(matched_stop);
  return c;
}

inline StreamChunk error_chunk(std::string message) {
  StreamChunk c;
  c.finish = FinishReason::Error;
  c.error = std::move(message);
  return c;
}

class FakeEngine : public EngineApi {
 public:
  // The chunks for one request (its index among all submitted so far, and the request).
  using Script = std::function<std::vector<StreamChunk>(int index, const GenerationRequest&)>;

  FakeEngine() {
    info_.name = "fake-model";
    info_.vocab_size = 512;
    info_.max_model_len = 256;
    info_.eos_token_ids = {2};
  }
  ~FakeEngine() override {
    for (std::thread& t : threads_) t.join();
  }

  // Default script: "Hello" " world", then a Stop.
  Script script = [](int, const GenerationRequest& r) {
    return std::vector<StreamChunk>{text_chunk("Hello", {72}), text_chunk(" world", {87}),
                                    final_chunk(FinishReason::Stop, int(r.prompt.size()), 2)};
  };
  // When set, chunks are pushed one every `pace` from a thread, and a cancelled stream
  // gets a final Cancelled chunk instead of the rest.
  std::chrono::milliseconds pace{0};

  std::shared_ptr<RequestStream> submit(GenerationRequest request) override {
    auto stream = std::make_shared<RequestStream>();
    int index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = int(requests_.size());
      requests_.push_back(request);
      streams_.push_back(stream);
    }
    std::vector<StreamChunk> chunks = script(index, request);
    if (pace.count() == 0) {
      for (StreamChunk& c : chunks) stream->push(std::move(c));
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([this, stream, chunks = std::move(chunks)]() mutable {
        play(*stream, std::move(chunks));
      });
    }
    return stream;
  }

  EngineStats stats() const override {
    EngineStats s;
    s.kv_blocks_total = 100;
    s.kv_blocks_used = 25;
    s.kv_blocks_cached = 30;
    s.kv_groups = {{0, 60, 20, 18}, {512, 40, 5, 12}};
    s.prefix_cache_enabled = true;
    s.prefix_cache_queries_total = 200;
    s.prefix_cache_hits_total = 150;
    s.generation_tokens_total = 7;
    return s;
  }
  const ModelInfo& model_info() const override { return info_; }
  ModelInfo& info() { return info_; }

  std::vector<GenerationRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::shared_ptr<RequestStream>> streams() const {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_;
  }
  int num_cancel_seen() const { return cancel_seen_.load(); }

 private:
  void play(RequestStream& stream, std::vector<StreamChunk> chunks) {
    for (StreamChunk& c : chunks) {
      std::this_thread::sleep_for(pace);
      if (stream.cancelled()) {
        ++cancel_seen_;
        stream.push(final_chunk(FinishReason::Cancelled, 0, 0));
        return;
      }
      stream.push(std::move(c));
    }
  }

  ModelInfo info_;
  mutable std::mutex mu_;
  std::vector<GenerationRequest> requests_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<std::thread> threads_;
  std::atomic<int> cancel_seen_{0};
};

// A script that cuts `text` into pieces of `piece` bytes, one token each, then stops.
inline FakeEngine::Script pieces_of(std::string text, size_t piece) {
  return [text, piece](int, const GenerationRequest& r) {
    std::vector<StreamChunk> chunks;
    for (size_t i = 0; i < text.size(); i += piece)
      chunks.push_back(text_chunk(text.substr(i, piece), {5}));
    chunks.push_back(final_chunk(FinishReason::Stop, int(r.prompt.size()), int(chunks.size())));
    return chunks;
  };
}

}  // namespace tandem::server::testing
