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
      kv_(make_kv_block_manager(model_->kv_specs(), backend_->act_dtype(),
                                kv_sizing(*model_, config_))),
      scheduler_(config_.scheduler, kv_) {
  const ModelConfig& c = model_->config();
  int block_size = config_.scheduler.block_size;
  runner_ = std::make_unique<ModelRunner>(*model_, *backend_, kv_.num_blocks(), block_size);
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
  info_.eos_token_ids = c.eos_token_ids;
  info_.num_parameters = model_->num_parameters();
  info_.dtype = std::string(dtype_name(backend_->act_dtype()));
  info_.block_size = block_size;
  stats_.kv_blocks_total = kv_.capacity();
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

bool Engine::should_stop(Sequence& seq, int32_t token) const {
  if (seq.num_generated() < seq.request.min_tokens) return false;
  const auto& r = seq.request;
  if (!r.ignore_eos && std::count(info_.eos_token_ids.begin(), info_.eos_token_ids.end(), token)) return true;
  return std::count(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) > 0;
}

void Engine::emit_token(Sequence& seq, const GeneratedToken& token) {
  seq.tokens.push_back(token.token);
  StreamChunk chunk;
  chunk.tokens.push_back(token);
  bool stop_token = should_stop(seq, token.token);
  if (seq.detokenizer && !stop_token) chunk.text = seq.stop.push(seq.detokenizer->push(token.token));
  if (seq.stream) seq.stream->push(std::move(chunk));
  if (stop_token || seq.stop.matched()) finish(seq, FinishReason::Stop);
  else if (seq.num_generated() >= seq.request.max_tokens || seq.num_tokens() >= info_.max_model_len)
    finish(seq, FinishReason::Length);
}

void Engine::finish(Sequence& seq, FinishReason reason) {
  StreamChunk last;
  if (seq.detokenizer && reason != FinishReason::Stop) last.text = seq.stop.push(seq.detokenizer->finish());
  if (!seq.stop.matched()) last.text += seq.stop.flush();
  last.finish = reason;
  if (seq.stop.matched()) last.matched_stop = *seq.stop.matched();
  last.prompt_tokens = seq.num_prompt;
  last.completion_tokens = seq.num_generated();
  if (seq.stream) seq.stream->push(std::move(last));
  scheduler_.finish(&seq);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.requests_finished++;
  }
  std::erase_if(live_, [&](const std::shared_ptr<Sequence>& s) { return s.get() == &seq; });
}

bool Engine::step() {
  take_inbox();
  drop_cancelled();
  std::vector<ScheduledRow> rows = scheduler_.schedule();
  if (!rows.empty()) {
    std::vector<PlanRow> plan_rows;
    for (auto& r : rows)
      plan_rows.push_back({r.seq->tokens, r.seq->num_computed, r.num_tokens, r.seq->block_tables,
                           r.sample ? 1 : 0});
    StepPlan plan = build_step_plan(plan_rows, config_.scheduler.block_size);
    Tensor logits = runner_->forward(plan);  // [sampled rows, vocab], on the device
    int64_t prompt_tokens = 0, generated = 0;
    std::vector<Sequence*> sampled;
    for (auto& r : rows) {
      int computed = r.seq->num_computed;
      prompt_tokens += std::max(0, std::min(r.seq->num_prompt, computed + r.num_tokens) - computed);
      if (r.sample) sampled.push_back(r.seq);
    }
    scheduler_.advance(rows);
    // One sampling op for the whole step; only the picked tokens come back to the host.
    std::vector<SampleRow> sample_rows;
    for (Sequence* seq : sampled)
      sample_rows.push_back(seq->sampler.row(seq->tokens, seq->num_prompt, seq->request.top_logprobs));
    std::vector<SampledToken> picked(sampled.size());
    if (!sampled.empty()) backend_->sample(logits, sample_rows, picked);
    for (size_t i = 0; i < sampled.size(); i++) {
      generated++;
      emit_token(*sampled[i], to_generated(picked[i]));
    }
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.prompt_tokens_total += prompt_tokens;
    stats_.generation_tokens_total += generated;
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.num_running = int(scheduler_.running().size());
  stats_.num_waiting = int(scheduler_.waiting().size());
  stats_.kv_blocks_used = kv_.num_used();
  stats_.num_preemptions = scheduler_.num_preemptions();
  return !rows.empty();
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
        // A failed step fails the rows in it, never the engine.
        for (auto& seq : std::vector<std::shared_ptr<Sequence>>(live_)) {
          if (seq->status != SeqStatus::Running) continue;
          StreamChunk c;
          c.finish = FinishReason::Error;
          c.error = e.what();
          if (seq->stream) seq->stream->push(std::move(c));
          scheduler_.finish(seq.get());
          std::erase(live_, seq);
        }
      }
    }
    for (auto& seq : std::vector<std::shared_ptr<Sequence>>(live_)) finish(*seq, FinishReason::Cancelled);
  });
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
