#include "engine/engine.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/media_check.h"
#include "engine/pooled_rows.h"
#include "grammar/grammar.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

KvSizing kv_sizing(const ModelConfig& model, const EngineConfig& config) {
  return {.block_size = config.scheduler.block_size,
          .max_rows = config.scheduler.max_rows,
          .max_batched_tokens = config.scheduler.max_batched_tokens,
          .max_model_len = config.max_model_len.value_or(model.max_position_embeddings),
          .budget_bytes = config.kv_budget_bytes,
          .prefix_caching = config.enable_prefix_caching};
}

Engine::Engine(std::unique_ptr<Executor> executor, std::shared_ptr<const Tokenizer> tokenizer,
               EngineConfig config)
    : executor_(std::move(executor)),
      tokenizer_(std::move(tokenizer)),
      config_(std::move(config)),
      kv_layout_(executor_->allocate_kv(kv_sizing(*executor_->info().model, config_))),
      kv_(kv_layout_.groups, kv_layout_.num_blocks, config_.scheduler.block_size,
          config_.enable_prefix_caching),
      scheduler_(config_.scheduler, kv_),
      loras_(executor_->info().model->lora.max_loras) {
  const ExecutorInfo& e = executor_->info();
  const ModelConfig& c = *e.model;
  info_.name = config_.served_model_name;
  info_.vocab_size = c.vocab_size;
  info_.hidden_size = c.hidden_size;
  // A sequence must always fit alone, or it could preempt itself forever.
  info_.max_model_len = int(std::min<int64_t>(
      config_.max_model_len.value_or(c.max_position_embeddings), kv_.max_sequence_tokens()));
  executor_->prepare(info_.max_model_len, config_.scheduler.max_rows);
  if (config_.speculative)
    executor_->prepare_speculation(config_.speculative->num_speculative_tokens + 1);
  overlap_ = config_.overlap == Overlap::On || (config_.overlap == Overlap::Auto && e.asynchronous);
  info_.eos_token_ids = c.eos_token_ids;
  info_.num_parameters = e.num_parameters;
  info_.dtype = std::string(dtype_name(e.act_dtype));
  info_.block_size = config_.scheduler.block_size;
  info_.vision = e.vision;
  stats_.kv_blocks_total = kv_.capacity();
  for (int g = 0; g < kv_.num_groups(); ++g) {
    const int window = kv_.groups().groups[size_t(g)].window;
    stats_.kv_groups.push_back({window, kv_.pool(g).capacity(), 0, 0});
  }
  if (config_.speculative) {
    const SpeculativeConfig& sc = *config_.speculative;
    TANDEM_CHECK(sc.method != SpecMethod::DraftModel || (e.draft && kv_layout_.draft_group),
                 "speculative decoding with a draft model needs an executor that runs it");
    speculator_ = std::make_unique<Speculator>(
        sc, SpeculatorSetup{.vocab_size = info_.vocab_size,
                            .max_model_len = info_.max_model_len,
                            .eos_token_ids = info_.eos_token_ids,
                            .block_size = config_.scheduler.block_size,
                            .draft_table_group = kv_layout_.draft_group.value_or(0),
                            .draft_num_groups = kv_layout_.draft_num_groups});
    stats_.spec_decode = speculator_->stats();
  }
}

Engine::~Engine() { stop(false); }

std::shared_ptr<RequestStream> Engine::submit(GenerationRequest request) {
  auto stream = std::make_shared<RequestStream>();
  auto refuse = [&](std::string why) {
    StreamChunk c;
    c.finish = FinishReason::Error;
    c.error = std::move(why);
    stream->push(std::move(c));
    return stream;
  };
  int n = int(request.prompt.size());
  if (n == 0) return refuse("the prompt is empty");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= info_.vocab_size)
      return refuse(fmt::format("token id {} is outside the vocabulary (0..{})", id, info_.vocab_size - 1));
  if (const auto& pl = request.prompt_logprobs) {
    if (pl->first < 1 || pl->first > n)
      return refuse(fmt::format("prompt logprobs from position {}: the prompt has positions 1..{}", pl->first, n - 1));
    if (pl->top < 0 || pl->top > kMaxSampleTopLogprobs)
      return refuse(fmt::format("prompt top logprobs must be in 0..{} (got {})", kMaxSampleTopLogprobs, pl->top));
  }
  if (auto why = pooling_refusal(request)) return refuse(*why);
  const int min_tokens = request.prompt_logprobs || request.pooling ? 0 : 1;
  if (request.max_tokens < min_tokens)
    return refuse(fmt::format("max_tokens must be >= {} (got {})", min_tokens, request.max_tokens));
  if (request.grammar && request.grammar->vocab().num_tokens() != info_.vocab_size)
    return refuse(fmt::format("the grammar was compiled for {} tokens, the model has {}",
                              request.grammar->vocab().num_tokens(), info_.vocab_size));
  if (const auto& t = request.thinking) {
    if (!t->vocab) return refuse("a thinking request needs the model's thinking vocabulary");
    if (t->vocab->num_tokens() != info_.vocab_size)
      return refuse(fmt::format("the thinking vocabulary has {} tokens, the model {}",
                                t->vocab->num_tokens(), info_.vocab_size));
    if (t->budget && *t->budget < 0)
      return refuse(fmt::format("the thinking budget must be >= 0 (got {})", *t->budget));
  }
  if (auto bad = check_media(request, info_.vision, kv_.max_step_tokens(int64_t(n) + request.max_tokens)))
    return refuse(*bad);
  if (int64_t(n) + request.max_tokens > info_.max_model_len)
    return refuse(fmt::format("prompt ({} tokens) + max_tokens ({}) exceeds the context length ({})",
                              n, request.max_tokens, info_.max_model_len));
  std::optional<LoraUse> lora;
  if (request.lora && !(lora = loras_.acquire(*request.lora)))
    return refuse(fmt::format("unknown LoRA adapter '{}'", *request.lora));
  std::lock_guard<std::mutex> lock(inbox_mu_);
  inbox_.push_back(std::make_shared<Sequence>(next_id_++, std::move(request), stream, seeder_(), lora));
  inbox_cv_.notify_one();
  return stream;
}

std::vector<std::pair<std::string, std::string>> Engine::lora_adapters() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const LoraAdapter& a : loras_.list()) out.emplace_back(a.name, a.dir.string());
  return out;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  EngineStats s = stats_;
  std::lock_guard<std::mutex> lock2(inbox_mu_);
  s.num_waiting += int(inbox_.size());
  return s;
}

void Engine::take_inbox() {
  run_lora_installs();
  std::vector<std::shared_ptr<Sequence>> fresh;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    fresh.swap(inbox_);
  }
  for (auto& seq : fresh) admit(std::move(seq));
}

void Engine::admit(std::shared_ptr<Sequence> seq) {
  if (tokenizer_)
    seq->detokenizer = std::make_unique<IncrementalDecoder>(tokenizer_, seq->request.skip_special_tokens);
  scheduler_.add(seq.get());
  live_.push_back(std::move(seq));
}

void Engine::drop_cancelled() {
  for (size_t i = 0; i < live_.size();) {
    Sequence& seq = *live_[i];
    if (seq.stream && seq.stream->cancelled()) finish(seq, FinishReason::Cancelled);
    else i++;
  }
}

// A token of the step in flight arrived for `seq`. A constrained row's matcher follows it;
// the grammar alone decides when such a row may take EOS, and ends it once only EOS could
// follow.
void Engine::emit_token(Sequence& seq, const GeneratedToken& token) {
  if (seq.grammar_failure) return fail_row(seq, *seq.grammar_failure);
  std::string why;
  const GrammarVerdict verdict = seq.constraint.follow(token.token, &why);
  if (verdict == GrammarVerdict::Rejected) return fail_row(seq, why);
  seq.receive(token.token);
  const int generated = int(seq.tokens.size()) - seq.num_prompt;
  StreamChunk chunk;
  chunk.tokens.push_back(token);
  take_prompt_logprobs(seq, chunk);
  bool stop_token = seq.stops_on(token.token, generated, info_.eos_token_ids) || verdict == GrammarVerdict::Ended;
  if (seq.detokenizer && !stop_token) chunk.text = seq.stop.push(seq.detokenizer->push(token.token));
  if (seq.stream) seq.stream->push(std::move(chunk));
  if (stop_token || seq.stop.matched() || verdict == GrammarVerdict::Complete)
    finish(seq, FinishReason::Stop);
  else if (generated >= seq.request.max_tokens || int(seq.tokens.size()) >= info_.max_model_len)
    finish(seq, FinishReason::Length);
}

// One row fails (its grammar gave out); the others go on.
void Engine::fail_row(Sequence& seq, const std::string& why) {
  seq.num_in_flight = 0;
  seq.in_flight_row.reset();
  StreamChunk c;
  c.finish = FinishReason::Error;
  c.error = why;
  c.prompt_tokens = seq.num_prompt;
  c.completion_tokens = seq.num_generated();
  release_lora(seq);
  scheduler_.finish(&seq);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.requests_finished++;
  }
  if (seq.stream) seq.stream->push(std::move(c));
  std::erase_if(live_, [&](const std::shared_ptr<Sequence>& s) { return s.get() == &seq; });
}

void Engine::finish(Sequence& seq, FinishReason reason) {
  // Tokens issued past the one that ended it are never emitted.
  seq.num_in_flight = 0;
  seq.in_flight_row.reset();
  release_lora(seq);
  StreamChunk last;
  if (seq.detokenizer && reason != FinishReason::Stop) last.text = seq.stop.push(seq.detokenizer->finish());
  if (!seq.stop.matched()) last.text += seq.stop.flush();
  last.finish = reason;
  if (seq.stop.matched()) last.matched_stop = *seq.stop.matched();
  last.prompt_tokens = seq.num_prompt;
  last.completion_tokens = seq.num_generated();
  last.cached_tokens = seq.num_cached_tokens.value_or(0);
  take_prompt_logprobs(seq, last);
  if (seq.pooling && seq.pooling->done()) last.embedding = seq.pooling->vector();
  scheduler_.finish(&seq);
  {
    // Counted before the client can see the end of its stream (and read /stats).
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.requests_finished++;
  }
  if (seq.stream) seq.stream->push(std::move(last));
  std::erase_if(live_, [&](const std::shared_ptr<Sequence>& s) { return s.get() == &seq; });
}

// The chunk's prompt logprobs, the first time there are any to carry.
void Engine::take_prompt_logprobs(Sequence& seq, StreamChunk& chunk) {
  if (seq.prompt_logprobs_sent || !seq.request.prompt_logprobs) return;
  chunk.prompt_logprobs = std::move(seq.prompt_logprobs);
  seq.prompt_logprobs.clear();
  seq.prompt_logprobs_sent = true;
}

StepPlan Engine::plan_step(const std::vector<ScheduledRow>& rows) const {
  std::vector<PlanRow> plan_rows;
  for (const ScheduledRow& r : rows) {
    const Sequence& seq = *r.seq;
    TANDEM_CHECK(seq.num_in_flight == 0 || (in_flight_ && seq.in_flight_row),
                 "sequence {}: a token in flight with no step in flight", seq.id);
    const Sequence::LogitRange owed = seq.owed_prompt_logits();
    const PositionRange pooled = positions_to_pool(seq);
    plan_rows.push_back(
        {.tokens = seq.tokens,
         .start = seq.num_computed,
         .count = r.num_tokens,
         .block_tables = seq.block_tables,
         .num_logits = r.sample ? 1 + r.num_draft : 0,
         .feed_from = seq.in_flight_row,
         .lora_slot = seq.lora ? seq.lora->slot : 0,
         .logprob_begin = owed.begin,
         .logprob_end = owed.end,
         .logprob_top = seq.request.prompt_logprobs ? seq.request.prompt_logprobs->top : 0,
         .pool_begin = pooled.begin,
         .pool_end = pooled.end,
         .draft = std::span<const int32_t>(seq.spec.draft).first(size_t(r.num_draft)),
         .media = seq.request.media});
  }
  return build_step_plan(plan_rows, config_.scheduler.block_size);
}

std::vector<SampleRow> Engine::sample_rows(const std::vector<ScheduledRow>& rows) {
  std::vector<SampleRow> out;
  for (const ScheduledRow& r : rows)
    if (r.sample && r.num_draft > 0) {
      speculator_->verify_rows(*r.seq, out);  // its K + 1 positions, masked along the proposals
    } else if (r.sample) {
      Sequence& seq = *r.seq;
      out.push_back(seq.sampler.row(seq.tokens, seq.num_prompt, seq.request.top_logprobs,
                                    seq.num_in_flight));
      if (seq.status != SeqStatus::Finished) fill_grammar_mask(seq, out.back());
    }
  return out;
}

// The constrained or thinking row's mask for its next token. Its previous token must be on
// the host (the overlap rule, engine.h), so the matcher and the thinking are where the row
// is. Until a thinking row answers, its thinking decides the mask (reasoning_state.h).
void Engine::fill_grammar_mask(Sequence& seq, SampleRow& row) {
  if (seq.grammar_failure || !seq.constraint.has_mask()) return;
  TANDEM_CHECK(seq.num_in_flight == 0, "sequence {}: a grammar mask with a token in flight", seq.id);
  seq.mask.resize((size_t(info_.vocab_size) + 31) / 32);
  try {
    seq.constraint.fill_mask(seq.mask);
    row.allowed = seq.mask;
  } catch (const grammar::GrammarError& e) {
    seq.grammar_failure = e.what();  // sampled unconstrained; the row fails on arrival
  }
}

// Rows whose sampling reads their tokens (a grammar's matcher, penalties) while one of
// those tokens is still in flight.
bool Engine::reads_tokens_in_flight(const std::vector<ScheduledRow>& rows) const {
  for (const ScheduledRow& r : rows)
    if (r.sample && r.seq->num_in_flight > 0 &&
        (r.seq->constraint.matcher || r.seq->sampler.needs_history() ||
         (r.seq->constraint.reasoning && r.seq->constraint.reasoning->reads_last_token())))
      return true;
  return false;
}

// After the forward is issued: the rows' new num_computed, and the prompt tokens counted.
void Engine::advance(const std::vector<ScheduledRow>& rows) {
  int64_t prompt_tokens = 0;
  for (const ScheduledRow& r : rows) {
    const int computed = r.seq->num_computed;
    prompt_tokens += std::max(0, std::min(r.seq->num_prompt, computed + r.num_tokens) - computed);
  }
  scheduler_.advance(rows);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.prompt_tokens_total += prompt_tokens;
}

// Each sampled row's sequence now has one more token in flight, at that row of the op. A
// row verifying proposals has at least one; it is never fed (the step is read first).
Engine::InFlight Engine::mark_in_flight(const std::vector<ScheduledRow>& rows) {
  InFlight f;
  int position = 0;
  for (const ScheduledRow& r : rows) {
    f.num_tokens += r.num_tokens;
    f.has_prompt = f.has_prompt || r.num_tokens - r.num_draft > 1 || !r.sample;
    if (!r.sample) continue;
    Sequence& seq = *r.seq;
    if (seq.status != SeqStatus::Finished) {  // it may have stopped while this step was issued
      if (r.num_draft == 0) seq.in_flight_row = position;
      seq.num_in_flight++;
    }
    f.seqs.push_back(seq.shared_from_this());
    f.num_positions.push_back(1 + r.num_draft);
    f.speculative = f.speculative || r.num_draft > 0;
    position += 1 + r.num_draft;
  }
  return f;
}

// The prompt logprobs the forward just issued computed, to their rows (in the plan's
// order: row by row, position by position); the sequences that only scored their prompt
// and have now computed all of it.
std::vector<std::shared_ptr<Sequence>> Engine::receive_prompt_logprobs(
    const std::vector<ScheduledRow>& rows) {
  std::vector<GeneratedToken> scored = executor_->take_prompt_logprobs();
  size_t next = 0;
  std::vector<std::shared_ptr<Sequence>> scored_only;
  for (const ScheduledRow& r : rows) {
    Sequence& seq = *r.seq;
    const Sequence::LogitRange owed = seq.owed_prompt_logits();
    const int end = seq.num_computed + r.num_tokens;
    const int n = std::max(0, std::min(owed.end, end) - std::max(owed.begin, seq.num_computed));
    TANDEM_CHECK(next + size_t(n) <= scored.size(), "{} prompt logprobs for more rows", scored.size());
    seq.prompt_logprobs.insert(seq.prompt_logprobs.end(), scored.begin() + long(next),
                               scored.begin() + long(next + size_t(n)));
    next += size_t(n);
    seq.num_prompt_scored += n;
    if (seq.request.max_tokens == 0 && end >= seq.num_prompt) scored_only.push_back(seq.shared_from_this());
  }
  TANDEM_CHECK(next == scored.size(), "{} prompt logprobs for {} asked", scored.size(), next);
  return scored_only;
}

std::optional<Engine::InFlight> Engine::issue(const std::vector<ScheduledRow>& rows) {
  executor_->issue_forward(plan_step(rows));
  const std::vector<std::shared_ptr<Sequence>> scored_only = receive_prompt_logprobs(rows);
  receive_pooled_runs(rows, executor_->take_pooled());
  advance(rows);
  // The overlap rule (engine.h): the previous step's tokens are read here, while the
  // device runs this step's forward, when a row's sampling needs them on the host.
  std::vector<std::shared_ptr<Sequence>> alive;  // a row may finish (and leave live_) meanwhile
  if (in_flight_ && reads_tokens_in_flight(rows)) {
    for (const ScheduledRow& r : rows) alive.push_back(r.seq->shared_from_this());
    complete_in_flight();
  }
  const std::vector<SampleRow> sampling = sample_rows(rows);
  if (!sampling.empty()) executor_->issue_sampling(sampling);
  InFlight f = mark_in_flight(rows);
  for (const auto& seq : scored_only)
    if (seq->status != SeqStatus::Finished) finish(*seq, FinishReason::Length);
  if (f.seqs.empty()) return std::nullopt;
  return f;
}

void Engine::complete_in_flight() {
  InFlight f = std::move(*in_flight_);
  in_flight_.reset();
  const std::vector<SampledToken> picked = executor_->collect();
  size_t at = 0;
  int64_t generated = 0;
  for (size_t i = 0; i < f.seqs.size(); i++) {
    const size_t n = size_t(f.num_positions[i]);
    TANDEM_CHECK(at + n <= picked.size(), "{} tokens for more sampled positions", picked.size());
    const std::span<const SampledToken> mine(picked.data() + at, n);
    at += n;
    Sequence& seq = *f.seqs[i];
    if (seq.status == SeqStatus::Finished) continue;  // stopped or cancelled meanwhile
    if (n > 1) {
      generated += emit_verified(seq, mine);
    } else {
      generated++;
      emit_token(seq, to_generated(mine[0]));
    }
  }
  TANDEM_CHECK(at == picked.size(), "{} tokens for {} sampled positions", picked.size(), at);
  // The step's cost for the speculator: from its own step() call (a draft's forwards
  // included) or the previous step's tokens, whichever came later, to its tokens. With the
  // overlapped loop a step() call issues one step and waits for the one before, so the
  // call's own duration would charge each step its predecessor's cost.
  // A plain step issued with nothing in flight (the one before it read early, verifying,
  // or none) paid for its planning on the device's time: it is charged apart.
  const auto now = std::chrono::steady_clock::now();
  if (speculator_) speculator_->count_step(f.speculative);
  if (speculator_ && !f.has_prompt && !f.recorded_graph) {
    const StepKind kind = f.speculative  ? StepKind::Speculative
                          : f.overlapped ? StepKind::Overlapped
                                         : StepKind::Synchronous;
    speculator_->observe_step(
        kind, f.num_tokens,
        std::chrono::duration<double>(now - std::max(f.started, last_completion_)).count());
  }
  last_completion_ = now;
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.generation_tokens_total += generated;
}

bool Engine::step() {
  const auto started = std::chrono::steady_clock::now();
  take_inbox();
  // A row's proposals follow its last token, and a verifying row's tokens decide the next
  // plan: such steps are read before planning (engine.h).
  if (in_flight_ && speculator_ &&
      (in_flight_->speculative || speculator_->may_speculate(scheduler_.running())))
    complete_in_flight();
  drop_cancelled();
  if (speculator_) speculator_->propose(scheduler_.running(), in_flight_.has_value());
  std::vector<ScheduledRow> rows = scheduler_.schedule();
  const int64_t recorded = executor_->graphs_recorded();
  if (speculator_) {
    speculator_->take_schedule(rows);
    if (speculator_->uses_draft_model()) run_draft(rows);
  }
  const bool worked = !rows.empty() || in_flight_.has_value();
  const bool overlapped = in_flight_.has_value();  // issue() may read it (the overlap rule)
  std::optional<InFlight> issued;
  if (!rows.empty()) issued = issue(rows);
  if (issued) {
    issued->started = started;
    issued->recorded_graph = executor_->graphs_recorded() != recorded;
    issued->overlapped = overlapped;
  }
  if (in_flight_) complete_in_flight();  // step n's tokens, while step n+1 runs
  in_flight_ = std::move(issued);
  if (in_flight_ && !overlap_) complete_in_flight();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.num_running = int(scheduler_.running().size());
  stats_.num_waiting = int(scheduler_.waiting().size());
  stats_.kv_blocks_used = kv_.num_used();
  stats_.kv_blocks_cached = kv_.num_cached();
  for (int g = 0; g < kv_.num_groups(); ++g) {
    stats_.kv_groups[size_t(g)].used = kv_.pool(g).num_used();
    stats_.kv_groups[size_t(g)].cached = kv_.pool(g).num_cached();
  }
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.prefix_cache_enabled = kv_.prefix_caching();
  stats_.prefix_cache_queries_total = scheduler_.prefix_cache_counts().queries;
  stats_.prefix_cache_hits_total = scheduler_.prefix_cache_counts().hits;
  const VisionEncodeStats vision = executor_->vision_encode_stats();
  stats_.images_encoded_total = vision.images;
  stats_.vision_encode_ms_total.reset();
  if (vision.seconds) stats_.vision_encode_ms_total = *vision.seconds * 1e3;
  if (speculator_) stats_.spec_decode = speculator_->stats();
  return worked;
}

void Engine::run_draft(std::vector<ScheduledRow>& rows) {
  const DraftStep step = speculator_->draft_step(rows);
  if (step.first.tokens.empty()) return;
  speculator_->take_proposals(rows, executor_->run_draft(step));
}

int Engine::emit_verified(Sequence& seq, std::span<const SampledToken> picked) {
  const int k = int(picked.size()) - 1;
  const int accepted = speculator_->accept(seq, picked);
  // The step computed the row's last token and its K proposals; the K/V of the rejected
  // ones goes (only final tokens are ever cached: they are not).
  scheduler_.rollback(&seq, seq.num_computed - (k - accepted));
  seq.num_in_flight = accepted + 1;
  int emitted = 0;
  for (int i = 0; i <= accepted && seq.status != SeqStatus::Finished; i++, emitted++)
    emit_token(seq, to_generated(picked[size_t(i)]));
  return emitted;
}

void Engine::run_until_idle() {
  for (;;) {
    bool worked = step();
    if (!worked && live_.empty()) {
      std::lock_guard<std::mutex> lock(inbox_mu_);
      if (inbox_.empty()) return;
    }
  }
}

void Engine::start() {
  stopping_ = false;
  thread_ = std::thread([this] {
    while (!stopping_ || (draining_ && !live_.empty())) {
      try {
        if (!step()) wait_for_work();
      } catch (const std::exception& e) {
        fail_running(e.what());  // a failed step fails the rows in it, never the engine
      }
    }
    in_flight_.reset();
    for (auto& seq : std::vector<std::shared_ptr<Sequence>>(live_)) finish(*seq, FinishReason::Cancelled);
    refuse_lora_installs();
  });
}

// The rows of a failed step: every running sequence, and any whose token was in flight
// (it will never arrive).
void Engine::fail_running(const std::string& why) {
  in_flight_.reset();
  executor_->reset();
  for (auto& seq : std::vector<std::shared_ptr<Sequence>>(live_)) {
    if (seq->status != SeqStatus::Running && seq->num_in_flight == 0) continue;
    StreamChunk c;
    c.finish = FinishReason::Error;
    c.error = why;
    c.server_error = true;
    if (seq->stream) seq->stream->push(std::move(c));
    release_lora(*seq);
    scheduler_.finish(seq.get(), /*cache=*/false);
    std::erase(live_, seq);
  }
  kv_.clear_cache();
}

void Engine::wait_for_work() {
  // Idle: sleep until a request arrives or stop() is called. The timeout bounds how late a
  // cancellation of a queued-but-unschedulable request is noticed.
  std::unique_lock<std::mutex> lock(inbox_mu_);
  inbox_cv_.wait_for(lock, std::chrono::milliseconds(20), [&] {
    return !inbox_.empty() || !lora_installs_.empty() || stopping_.load();
  });
}

void Engine::stop(bool drain) {
  if (!thread_.joinable()) return;
  draining_ = drain;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    stopping_ = true;
  }
  inbox_cv_.notify_all();
  thread_.join();
}

}  // namespace tandem
