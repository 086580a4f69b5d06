// A request's own channel: the engine thread pushes chunks, one HTTP thread pops them.
// Cancelling (client gone) is a flag the engine checks once per step; the engine then
// frees the sequence's KV blocks and pushes a final Cancelled chunk.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace tandem {

class RequestStream {
 public:
  void push(StreamChunk chunk) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (chunk.finish) closed_ = true;
      queue_.push_back(std::move(chunk));
    }
    cv_.notify_one();
  }

  // Waits up to `timeout` for the next chunk; nullopt on timeout.
  std::optional<StreamChunk> pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
    StreamChunk c = std::move(queue_.front());
    queue_.pop_front();
    return c;
  }

  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamChunk> queue_;
  bool closed_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tandem
