// Sequence: one request's state on the engine thread. The scheduler and the KV pool
// share only this: tokens, how many of them are in the cache, and the block tables (one
// per KV group, kv/kv_block_manager.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/lora_adapters.h"
#include "engine/pooling.h"
#include "engine/reasoning_state.h"
#include "engine/row_constraint.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sampler.h"
#include "engine/spec_state.h"
#include "engine/stop_matcher.h"
#include "kv/kv_block_manager.h"
#include "kv/prefix_cache.h"

namespace tandem {

class IncrementalDecoder;

// Preempted: back in the waiting queue, its blocks freed, to recompute what it had.
enum class SeqStatus : uint8_t { Waiting, Running, Preempted, Finished };

struct Sequence : std::enable_shared_from_this<Sequence> {
  // `lora`: the adapter the sequence runs with; its stable id keys the prefix cache, so two
  // adapters (or one and the base model) never share KV blocks.
  Sequence(int64_t id, GenerationRequest request, std::shared_ptr<RequestStream> stream,
           uint64_t fallback_seed, std::optional<LoraUse> lora = std::nullopt);
  ~Sequence();

  int64_t id;
  GenerationRequest request;
  std::shared_ptr<RequestStream> stream;  // null when nobody listens (tests)
  // The prompt, then every generated token the host has received: all final (engine.h).
  std::vector<int32_t> tokens;
  int num_prompt = 0;
  // Tokens sampled by steps still in flight, not yet received: they follow `tokens` (the
  // overlapped loop, engine.h; vLLM's num_output_placeholders). 0 or 1 when planning.
  int num_in_flight = 0;
  // The row of the latest in-flight token in its step's sampling op, while there is one:
  // the next step's plan feeds it from there on the device.
  std::optional<int> in_flight_row;
  int num_computed = 0;     // positions whose K/V is in the cache (may include in-flight ones)
  BlockTables block_tables;  // [KV groups][blocks], append-only while running
  // Prefix cache: the hashes of the full blocks of `tokens` (final tokens only), and how
  // many blocks of the tables are named in the pools (kv/kv_block_manager.h).
  BlockHashChain block_hashes;
  int num_named_blocks = 0;
  // The prompt's images (request.media) as token ranges with their content hashes: each is
  // computed in one step (fit_chunk), and mixed into the hashes of the blocks it overlaps.
  std::vector<TokenRange> media_ranges;
  // Prompt tokens the first admission found in the prefix cache (what usage reports).
  std::optional<int> num_cached_tokens;
  SeqStatus status = SeqStatus::Waiting;
  Sampler sampler;
  StopMatcher stop;
  std::unique_ptr<IncrementalDecoder> detokenizer;  // null when the engine has no tokenizer
  // A constrained request's place in its grammar, and a thinking row's place in its
  // thinking (GenerationRequest::thinking: until it answers, it decides the row's mask and
  // what of each token the matcher sees); advanced on every token received. The mask of
  // its next token is filled into `mask`, which the step's SampleRow points at.
  RowConstraint constraint;
  std::vector<uint32_t> mask;
  // Why the grammar could not give this row's next mask (it outgrew its limits): the row
  // fails when that token arrives, its output so far still a valid prefix.
  std::optional<std::string> grammar_failure;
  std::optional<LoraUse> lora;  // the adapter's slot and stable id, held until finished
  // GenerationRequest::prompt_logprobs received and not yet sent; how many were received
  // (kept across a preemption, so a recomputed prompt is not scored twice), and whether a
  // chunk has carried them.
  std::vector<GeneratedToken> prompt_logprobs;
  int num_prompt_scored = 0;
  bool prompt_logprobs_sent = false;
  // GenerationRequest::pooling: the hidden states pooled so far (engine/pooling.h).
  std::optional<PoolingState> pooling;
  // Speculative decoding: its proposals and acceptance (engine/speculator.h).
  SpecState spec;

  // Positions known so far: received tokens and those in flight.
  int num_tokens() const { return int(tokens.size()) + num_in_flight; }
  int num_generated() const { return num_tokens() - num_prompt; }
  bool prefilling() const { return num_computed < num_prompt; }
  // Tokens the scheduler may compute now: every known one not in the cache, except when
  // the request's last token is in flight (nothing will read its K/V; it only waits).
  int num_schedulable() const {
    if (num_in_flight > 0 && num_generated() >= request.max_tokens) return 0;
    return num_tokens() - num_computed;
  }
  // How many of the `n` tokens from position `start` one step may compute without ending
  // inside an image: cut before an image that starts later, or stretched to the end of one
  // that starts at `start` (a step over budget rather than an image split across steps).
  int fit_chunk(int start, int n) const {
    for (const TokenRange& m : media_ranges)
      if (m.begin < start + n && start + n < m.end)
        return m.begin > start ? m.begin - start : m.end - start;
    return n;
  }
  // Whether computing `n` more tokens reaches the last known one, whose row samples the
  // next token (never for a request of max_tokens 0: it only scores its prompt).
  bool samples_after(int n) const {
    return request.max_tokens > 0 && num_computed + n == num_tokens();
  }
  // Prompt logprobs still owed: the positions [begin, end) whose logits score the token
  // after them (empty when none are asked for or all have been received).
  struct LogitRange {
    int begin = 0, end = 0;
  };
  LogitRange owed_prompt_logits() const {
    if (!request.prompt_logprobs) return {};
    const int begin = request.prompt_logprobs->first - 1 + num_prompt_scored;
    return {begin, std::max(begin, num_prompt - 1)};
  }
  // The first position whose logits (or hidden state) are still wanted: a prefix-cache hit
  // must stop at or before it (the last known token samples the next; owed prompt logprobs
  // and positions an embedding still pools come earlier).
  int first_wanted_logits() const {
    const LogitRange owed = owed_prompt_logits();
    const int last = num_tokens() - 1;
    const int first = owed.begin < owed.end ? std::min(owed.begin, last) : last;
    return pooling && !pooling->done() ? std::min(first, pooling->owed().begin) : first;
  }
  // Whether emitting `token` as its `generated`-th output token ends the row: EOS (one of
  // `eos`, unless ignore_eos) or a stop token, once min_tokens are out.
  bool stops_on(int32_t token, int generated, std::span<const int32_t> eos) const {
    if (generated < request.min_tokens) return false;
    if (!request.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) return true;
    return std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), token) !=
           request.stop_token_ids.end();
  }
  // A token of a step in flight arrived (in order: the oldest first).
  void receive(int32_t token) {
    tokens.push_back(token);
    if (--num_in_flight == 0) in_flight_row.reset();
  }
};

}  // namespace tandem
