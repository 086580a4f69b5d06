// Sequence: one request's state on the engine thread. The scheduler and the KV pool
// share only this: tokens, how many of them are in the cache, and the block tables (one
// per KV group, kv/kv_block_manager.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sampler.h"
#include "engine/stop_matcher.h"
#include "kv/kv_block_manager.h"

namespace tandem {

class IncrementalDecoder;

enum class SeqStatus : uint8_t { Waiting, Running, Finished };

// A token the engine has asked the device for but not yet received: it sits in `tokens`
// while the step that samples it runs (the host plans the next step meanwhile).
constexpr int32_t kPendingToken = -1;

struct Sequence : std::enable_shared_from_this<Sequence> {
  using Clock = std::chrono::steady_clock;

  Sequence(int64_t id, GenerationRequest request, std::shared_ptr<RequestStream> stream,
           uint64_t fallback_seed);
  ~Sequence();

  int64_t id;
  GenerationRequest request;
  std::shared_ptr<RequestStream> stream;  // null when nobody listens (tests)
  std::vector<int32_t> tokens;            // prompt, then generated tokens
  int num_prompt = 0;
  int num_computed = 0;                   // tokens whose K/V is in the cache
  BlockTables block_tables;               // [KV groups][blocks], append-only while running
  SeqStatus status = SeqStatus::Waiting;
  Sampler sampler;
  StopMatcher stop;
  std::unique_ptr<IncrementalDecoder> detokenizer;  // null when the engine has no tokenizer
  std::optional<FinishReason> finish;
  // While the last token is kPendingToken: its row in the sampling op of the step in
  // flight (the next step reads it there). -1 otherwise.
  int pending_row = -1;
  // The last token the request can have is in flight: nothing more to compute.
  bool awaiting_last = false;
  Clock::time_point arrival = Clock::now();

  int num_tokens() const { return int(tokens.size()); }
  int num_generated() const { return num_tokens() - num_prompt; }
  int num_uncomputed() const { return num_tokens() - num_computed; }
  bool prefilling() const { return num_computed < num_prompt; }
};

}  // namespace tandem
