#include "engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

KvSizing kv_sizing(const Model& model, const EngineConfig& config) {
  KvSizing s;
  s.block_size = config.scheduler.block_size;
  s.max_rows = config.scheduler.max_rows;
  s.max_batched_tokens = config.scheduler.max_batched_tokens;
  s.max_model_len = config.max_model_len > 0 ? config.max_model_len
                                             : model.config().max_position_embeddings;
  s.budget_bytes = config.kv_budget_bytes;
  return s;
}

Engine::Engine(std::unique_ptr<Backend> backend, std::unique_ptr<Model> model,
               std::shared_ptr<const Tokenizer> tokenizer, EngineConfig config)
    : backend_(std::move(backend)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      config_(std::move(config)),
      kv_(make_kv_block_manager(model_->kv_specs(),
                                config_.kv_dtype.value_or(backend_->act_dtype()),
                                kv_sizing(*model_, config_))),
      scheduler_(config_.scheduler, kv_) {
  const ModelConfig& c = model_->config();
  int block_size = config_.scheduler.block_size;
  runner_ = std::make_unique<ModelRunner>(*model_, *backend_, kv_.num_blocks(), block_size,
                                          config_.kv_dtype);
  info_.name = config_.served_model_name;
  info_.vocab_size = c.vocab_size;
  info_.max_model_len = config_.max_model_len > 0 ? config_.max_model_len : c.max_position_embeddings;
  // A sequence must always fit alone, or it could preempt itself forever.
  info_.max_model_len = int(std::min<int64_t>(info_.max_model_len, kv_.max_sequence_tokens()));
  // Decode steps as recorded graphs where the backend has them; TANDEM_CUDA_GRAPHS=0 turns
  // them off (to compare against the eager path).
  const char* graphs_env = std::getenv("TANDEM_CUDA_GRAPHS");
  if (config_.graphs && !(graphs_env && std::string(graphs_env) == "0"))
    runner_->enable_graphs(info_.max_model_len, config_.scheduler.max_rows);
  overlap_ = config_.overlap > 0 || (config_.overlap < 0 && backend_->device() != Device::CPU);
  if (const char* env = std::getenv("TANDEM_OVERLAP")) overlap_ = std::string(env) != "0";
  info_.eos_token_ids = c.eos_token_ids;
  info_.num_parameters = model_->num_parameters();
  info_.dtype = std::string(dtype_name(backend_->act_dtype()));
  info_.block_size = block_size;
  stats_.kv_blocks_total = kv_.capacity();
  for (int g = 0; g < kv_.num_groups(); ++g) {
    const int window = kv_.groups().groups[size_t(g)].window;
    stats_.kv_groups.push_back({window, kv_.pool(g).capacity(), 0, 0});
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
  if (request.max_tokens < 1) return refuse(fmt::format("max_tokens must be >= 1 (got {})", request.max_tokens));
  if (int64_t(n) + request.max_tokens > info_.max_model_len)
    return refuse(fmt::format("prompt ({} tokens) + max_tokens ({}) exceeds the context length ({})",
                              n, request.max_tokens, info_.max_model_len));
  static std::mt19937_64 seeder{std::random_device{}()};
  std::lock_guard<std::mutex> lock(inbox_mu_);
  inbox_.push_back(std::make_shared<Sequence>(next_id_++, std::move(request), stream, seeder()));
  inbox_cv_.notify_one();
  return stream;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  EngineStats s = stats_;
  std::lock_guard<std::mutex> lock2(inbox_mu_);
  s.num_waiting += int(inbox_.size());
  return s;
}

void Engine::take_inbox() {
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

// `generated`: tokens generated with this one.
bool Engine::should_stop(const Sequence& seq, int generated, int32_t token) const {
  if (generated < seq.request.min_tokens) return false;
  const auto& r = seq.request;
  if (!r.ignore_eos && std::count(info_.eos_token_ids.begin(), info_.eos_token_ids.end(), token)) return true;
  return std::count(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) > 0;
}

// The token that arrived for position `index` of the sequence (its placeholder until now).
void Engine::emit_token(Sequence& seq, int index, const GeneratedToken& token) {
  seq.tokens[size_t(index)] = token.token;
  if (seq.pending_row >= 0 && index == seq.num_tokens() - 1) seq.pending_row = -1;
  const int generated = index + 1 - seq.num_prompt;
  StreamChunk chunk;
  chunk.tokens.push_back(token);
  bool stop_token = should_stop(seq, generated, token.token);
  if (seq.detokenizer && !stop_token) chunk.text = seq.stop.push(seq.detokenizer->push(token.token));
  if (seq.stream) seq.stream->push(std::move(chunk));
  if (stop_token || seq.stop.matched()) finish(seq, FinishReason::Stop);
  else if (generated >= seq.request.max_tokens || index + 1 >= info_.max_model_len)
    finish(seq, FinishReason::Length);
}

void Engine::finish(Sequence& seq, FinishReason reason) {
  // Tokens issued past the one that ended it were never emitted.
  while (!seq.tokens.empty() && seq.tokens.back() == kPendingToken) seq.tokens.pop_back();
  StreamChunk last;
  if (seq.detokenizer && reason != FinishReason::Stop) last.text = seq.stop.push(seq.detokenizer->finish());
  if (!seq.stop.matched()) last.text += seq.stop.flush();
  last.finish = reason;
  if (seq.stop.matched()) last.matched_stop = *seq.stop.matched();
  last.prompt_tokens = seq.num_prompt;
  last.completion_tokens = seq.num_generated();
  scheduler_.finish(&seq);
  {
    // Counted before the client can see the end of its stream (and read /stats).
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.requests_finished++;
  }
  if (seq.stream) seq.stream->push(std::move(last));
  std::erase_if(live_, [&](const std::shared_ptr<Sequence>& s) { return s.get() == &seq; });
}

std::optional<Engine::InFlight> Engine::issue(const std::vector<ScheduledRow>& rows) {
  std::vector<PlanRow> plan_rows;
  for (auto& r : rows)
    plan_rows.push_back({r.seq->tokens, r.seq->num_computed, r.num_tokens, r.seq->block_tables,
                         r.sample ? 1 : 0});
  StepPlan plan = build_step_plan(plan_rows, config_.scheduler.block_size);
  // A row's last token may still be on the device: the previous step's sampling op has it.
  for (size_t b = 0; b < rows.size(); b++) {
    const int t = plan.seq_starts[b + 1] - 1;
    if (plan.tokens[size_t(t)] != kPendingToken) continue;
    TANDEM_CHECK(in_flight_ && rows[b].seq->pending_row >= 0,
                 "sequence {}: a pending token with no step in flight", rows[b].seq->id);
    plan.feed_index.push_back(t);
    plan.feed_source.push_back(rows[b].seq->pending_row);
    plan.tokens[size_t(t)] = 0;
  }
  for (int32_t token : plan.tokens)
    TANDEM_CHECK(token != kPendingToken, "a pending token in the middle of a row");
  Tensor logits = runner_->forward(plan, in_flight_ ? &in_flight_->sample : nullptr);
  int64_t prompt_tokens = 0;
  for (auto& r : rows) {
    int computed = r.seq->num_computed;
    prompt_tokens += std::max(0, std::min(r.seq->num_prompt, computed + r.num_tokens) - computed);
  }
  scheduler_.advance(rows);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.prompt_tokens_total += prompt_tokens;
  }
  // One sampling op for the whole step; each sampled sequence gets a placeholder token.
  InFlight f;
  std::vector<SampleRow> sample_rows;
  for (auto& r : rows) {
    if (!r.sample) continue;
    Sequence& seq = *r.seq;
    sample_rows.push_back(seq.sampler.row(seq.tokens, seq.num_prompt, seq.request.top_logprobs));
    seq.pending_row = int(f.seqs.size());
    f.token_index.push_back(seq.num_tokens());
    seq.tokens.push_back(kPendingToken);
    if (seq.num_generated() >= seq.request.max_tokens || seq.num_tokens() >= info_.max_model_len)
      seq.awaiting_last = true;
    f.needs_history = f.needs_history || seq.sampler.needs_history();
    f.seqs.push_back(seq.shared_from_this());
  }
  if (f.seqs.empty()) return std::nullopt;
  f.sample = backend_->sample_async(logits, sample_rows);
  return f;
}

void Engine::complete_in_flight() {
  InFlight f = std::move(*in_flight_);
  in_flight_.reset();
  std::vector<SampledToken> picked(f.seqs.size());
  backend_->sample_wait(f.sample, picked);
  int64_t generated = 0;
  for (size_t i = 0; i < f.seqs.size(); i++) {
    Sequence& seq = *f.seqs[i];
    if (seq.status == SeqStatus::Finished) continue;  // stopped or cancelled meanwhile
    generated++;
    emit_token(seq, f.token_index[i], to_generated(picked[i]));
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.generation_tokens_total += generated;
}

bool Engine::step() {
  take_inbox();
  drop_cancelled();
  // Penalties read a row's every token: the next plan waits for the ones in flight.
  if (in_flight_ && in_flight_->needs_history) complete_in_flight();
  std::vector<ScheduledRow> rows = scheduler_.schedule();
  const bool worked = !rows.empty() || in_flight_.has_value();
  std::optional<InFlight> issued;
  if (!rows.empty()) issued = issue(rows);
  if (in_flight_) complete_in_flight();  // step n's tokens, while step n+1 runs
  in_flight_ = std::move(issued);
  if (in_flight_ && !overlap_) complete_in_flight();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.num_running = int(scheduler_.running().size());
  stats_.num_waiting = int(scheduler_.waiting().size());
  stats_.kv_blocks_used = kv_.num_used();
  for (int g = 0; g < kv_.num_groups(); ++g)
    stats_.kv_groups[size_t(g)].used = kv_.pool(g).num_used();
  stats_.num_preemptions = scheduler_.num_preemptions();
  return worked;
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
  });
}

// The rows of a failed step: every running sequence, and any whose token was in flight
// (its placeholder can no longer be filled).
void Engine::fail_running(const std::string& why) {
  in_flight_.reset();
  for (auto& seq : std::vector<std::shared_ptr<Sequence>>(live_)) {
    const bool pending = std::count(seq->tokens.begin(), seq->tokens.end(), kPendingToken) > 0;
    if (seq->status != SeqStatus::Running && !pending) continue;
    StreamChunk c;
    c.finish = FinishReason::Error;
    c.error = why;
    c.server_error = true;
    if (seq->stream) seq->stream->push(std::move(c));
    scheduler_.finish(seq.get());
    std::erase(live_, seq);
  }
}

void Engine::wait_for_work() {
  // Idle: sleep until a request arrives or stop() is called. The timeout bounds how late a
  // cancellation of a queued-but-unschedulable request is noticed.
  std::unique_lock<std::mutex> lock(inbox_mu_);
  inbox_cv_.wait_for(lock, std::chrono::milliseconds(20),
                     [&] { return !inbox_.empty() || stopping_.load(); });
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
