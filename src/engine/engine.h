// Engine: the loop that owns the KV block tables, the scheduler and every sequence
// (docs/DESIGN.md §1); the device is behind its Executor (engine/executor.h). Each step: take
// new requests, drop cancelled ones, plan (Scheduler), issue one batched forward and one
// sampling op (Executor), then per sampled row detokenize, apply stop rules, emit, and
// free the blocks of rows that finished. `--batch 1` is the same loop with one row per step.
//
// Overlap (on the GPU): step n+1 is planned and issued before step n's tokens are read.
// A token still on the device is not in its sequence's `tokens`: the sequence counts it
// (Sequence::num_in_flight) and the next step's plan feeds it from the device
// (PlanRow::feed_from → StepPlan::feed_index), so the host never waits for the GPU except
// to read tokens, and the GPU never waits for the host. A sequence that stops on a token
// of step n has already been given a row in step n+1: that row's token is dropped (its KV
// writes land in blocks freed after, reused only by later steps on the same stream). A
// sequence whose last allowed token is in flight gets no further rows.
//
// Rows that read their own tokens to be sampled — a grammar's matcher (its mask), or
// penalties (their counts) — need the previous token on the host. The rule: a step is
// issued in two halves (Executor::issue_forward, issue_sampling); when such a row has a
// token in flight, the engine reads the step in flight between the halves, while the
// device runs the new forward, then advances the matchers, fills the masks and issues the
// sampling op. The device stays busy as long as reading a step and filling its masks takes
// the host less than a forward; rows without a grammar or penalties never wait at all, and
// a step without such rows keeps the plain overlapped order. A sequence that stops on the
// step read in between still samples in the new step (its row is issued), unmasked, and
// its token is dropped on arrival like any token past a stop.
//
// Speculative decoding (engine/speculator.h) follows the same rule one step earlier: a row's
// proposals follow its last token, and a verifying row emits 1..K+1 tokens that decide its
// next chunk, so a step with such rows is read before the next step is planned, and
// before proposing the engine reads a plain step in flight when the speculator expects
// that to pay (Speculator::may_speculate). The device then waits for the host between
// those steps; the speculator's step costs (spec_controller.h) include that wait — a plain
// step planned with nothing in flight is charged apart from an overlapped one — so it
// reads early and speculates only where the tokens it expects outweigh the lost overlap.
// Proposals never enter Sequence::tokens; a verified row's K/V is rolled back to its
// accepted tokens before any of them is emitted (Engine::emit_verified).
//
// Which tokens are final: every entry of Sequence::tokens. The prompt, and each generated
// token once the host has received it; a token in flight never enters `tokens`, and one
// that arrives for a finished sequence is dropped. So a full block of `tokens` whose K/V
// is in the cache — positions below min(num_computed, tokens.size()) — holds final tokens
// and final K/V: exactly the blocks a prefix cache may hash (vLLM caches up to
// num_computed_tokens − num_output_placeholders for the same reason). A position the step
// in flight computed for a token not yet received is not one of them until it arrives.
// The scheduler names exactly these blocks for the prefix cache (Scheduler::cache_blocks,
// before each step and when a sequence leaves), and a failed step forgets every name.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine_api.h"
#include "engine/executor.h"
#include "engine/lora_adapters.h"
#include "engine/scheduler.h"
#include "engine/speculative_config.h"
#include "engine/speculator.h"
#include "kv/kv_block_manager.h"

namespace tandem {

class Tokenizer;

// Whether the engine issues step n+1 before reading step n's tokens (the host plans while
// the device runs).
enum class Overlap : uint8_t {
  Auto,  // where the executor runs asynchronously (not on the CPU, where it would only
         // delay each token by a step)
  On,
  Off,
};

struct EngineConfig {
  SchedulerConfig scheduler;
  // All KV groups together; nullopt: the executor's default (every row at max_model_len,
  // within what the device can spare).
  std::optional<int64_t> kv_budget_bytes;
  std::optional<int> max_model_len;  // nullopt: the model's max_position_embeddings
  std::string served_model_name;
  Overlap overlap = Overlap::Auto;
  // Reuse the KV blocks of cached prompt prefixes (kv/kv_block_manager.h);
  // --no-enable-prefix-caching turns it off.
  bool enable_prefix_caching = true;
  // Speculative decoding (--speculative-config; engine/speculator.h); a draft model must be
  // the executor's (ExecutorInfo::draft).
  std::optional<SpeculativeConfig> speculative;
};

class Engine : public EngineApi {
 public:
  // `tokenizer` may be null (token ids in, token ids out, no text).
  Engine(std::unique_ptr<Executor> executor, std::shared_ptr<const Tokenizer> tokenizer,
         EngineConfig config);
  ~Engine() override;

  std::shared_ptr<RequestStream> submit(GenerationRequest request) override;
  EngineStats stats() const override;
  const ModelInfo& model_info() const override { return info_; }
  std::vector<std::pair<std::string, std::string>> lora_adapters() const override;

  // Runs the loop on its own thread until stop(); stop() lets running requests finish
  // when `drain` is set, else cancels them.
  void start();
  void stop(bool drain = true);
  // One iteration on the calling thread; false when there was nothing to do.
  bool step();
  // Steps until every submitted request has finished (the CLI's serial path).
  void run_until_idle();

  // Serves the PEFT adapter in `dir` as `name` (requests select it by
  // GenerationRequest::lora), from any thread, before start() or while the loop runs (not
  // concurrently with start() or stop()). The folder is read and checked against the model
  // on the calling thread; the engine thread only copies the result into the adapter's
  // slot, between two steps (engine_lora.cpp). Throws LoraLoadError (lora_adapters.h).
  LoraAdapter load_lora(const std::string& name, const std::filesystem::path& dir) override;
  // Forgets adapter `name` unless a live sequence uses it (InUse: the caller says so).
  LoraRemoval unload_lora(const std::string& name) override { return loras_.remove(name); }
  const LoraAdapters& loras() const { return loras_; }

  // The KV block pools of every group; num_used/num_free/capacity add the groups up.
  const KvBlockManager& kv_blocks() const { return kv_; }
  // The KV cache the executor allocated (its dtype, budget and bytes).
  const KvLayout& kv_layout() const { return kv_layout_; }
  DType kv_dtype() const { return kv_layout_.dtype; }

 private:
  void take_inbox();
  void admit(std::shared_ptr<Sequence> seq);
  void drop_cancelled();
  // A step whose sampled tokens are still on their way to the host.
  struct InFlight {
    std::vector<std::shared_ptr<Sequence>> seqs;  // [R] the sequence of each sampled row
    // [R] its positions in the sampling op: 1, or K + 1 for a row verifying K proposals
    std::vector<int> num_positions;
    // Some row verifies proposals: the step is read before the next one is planned.
    bool speculative = false;
    // What the speculator's cost model charges it (spec_controller.h): the query tokens of
    // every row, and when its step() call began (a draft model runs before the forward).
    // A step that computes prompt tokens is not charged: its cost says nothing of a
    // decode or verify step's (the first prompt's also warms the device up).
    int num_tokens = 0;
    bool has_prompt = false;
    // Its forwards recorded a graph (decode or verify, Executor::graphs_recorded): not
    // charged either.
    bool recorded_graph = false;
    // Issued while the step before it was in flight: its planning overlapped the device
    // (a plain step so issued is charged as StepKind::Overlapped, else Synchronous).
    bool overlapped = false;
    std::chrono::steady_clock::time_point started;
  };
  // Issues `rows` as one forward and its sampling op, without waiting (plan, issue the
  // forward, advance, read the previous step if the rows need it, sampling rows, issue
  // the sampling, mark in flight).
  std::optional<InFlight> issue(const std::vector<ScheduledRow>& rows);
  StepPlan plan_step(const std::vector<ScheduledRow>& rows) const;
  std::vector<std::shared_ptr<Sequence>> receive_prompt_logprobs(const std::vector<ScheduledRow>& rows);
  void take_prompt_logprobs(Sequence& seq, StreamChunk& chunk);
  std::vector<SampleRow> sample_rows(const std::vector<ScheduledRow>& rows);
  void fill_grammar_mask(Sequence& seq, SampleRow& row);
  bool reads_tokens_in_flight(const std::vector<ScheduledRow>& rows) const;
  void fail_row(Sequence& seq, const std::string& why);
  void advance(const std::vector<ScheduledRow>& rows);
  InFlight mark_in_flight(const std::vector<ScheduledRow>& rows);
  // Waits for the in-flight step's tokens and emits them.
  void complete_in_flight();
  void fail_running(const std::string& why);
  // Speculative decoding: the draft model's proposals for the scheduled rows, and a
  // verifying row's tokens (its accepted proposals, then the target's own) with its K/V
  // rolled back to them; returns how many it emitted.
  void run_draft(std::vector<ScheduledRow>& rows);
  int emit_verified(Sequence& seq, std::span<const SampledToken> picked);
  void emit_token(Sequence& seq, const GeneratedToken& token);
  void finish(Sequence& seq, FinishReason reason);
  void wait_for_work();
  // LoRA (engine_lora.cpp): the slot image of the folder (off the engine thread), handing
  // it to the engine thread, and the engine thread's side, between steps.
  std::shared_ptr<const LoraSlotImage> read_lora_image(const std::filesystem::path& dir) const;
  void install_lora(int slot, std::shared_ptr<const LoraSlotImage> image);
  void run_lora_installs();
  void refuse_lora_installs();
  void release_lora(Sequence& seq);

  std::unique_ptr<Executor> executor_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  EngineConfig config_;
  KvLayout kv_layout_;
  KvBlockManager kv_;
  Scheduler scheduler_;
  ModelInfo info_;
  bool overlap_ = false;
  std::optional<InFlight> in_flight_;  // owned by the engine thread
  // When the last in-flight step's tokens arrived: a step's cost is the time from then (or
  // from its own step() call, if later) to its own tokens' arrival (complete_in_flight).
  std::chrono::steady_clock::time_point last_completion_;
  std::unique_ptr<Speculator> speculator_;  // with --speculative-config

  mutable std::mutex inbox_mu_;
  std::condition_variable inbox_cv_;  // signalled by submit() and stop()
  std::vector<std::shared_ptr<Sequence>> inbox_;
  // Adapters read and checked by load_lora, waiting for the engine thread to install them.
  struct LoraInstall {
    int slot = 0;
    std::shared_ptr<const LoraSlotImage> image;
    std::promise<void> done;
  };
  std::vector<LoraInstall> lora_installs_;  // under inbox_mu_
  int64_t next_id_ = 1;
  std::mt19937_64 seeder_{std::random_device{}()};  // fallback seeds; under inbox_mu_
  std::vector<std::shared_ptr<Sequence>> live_;  // owned by the engine thread

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> draining_{true};
  mutable std::mutex stats_mu_;
  EngineStats stats_;
  LoraAdapters loras_;
};

// The KV sizing an engine config asks for (kv/kv_budget.h): the byte budget, the rows,
// the step's token budget and the context length (the model's when the config has none).
KvSizing kv_sizing(const ModelConfig& model, const EngineConfig& config);

}  // namespace tandem
