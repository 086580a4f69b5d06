#include "server/common/server_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tandem::server {
namespace {

// vLLM's bucket boundaries, so dashboards built for vLLM read tandem the same way.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                             5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void write_header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP tandem:{} {}\n# TYPE tandem:{} {}\n", name, help, name, type);
}

void write_sample(std::string& out, const char* name, const std::string& labels, double value) {
  out += fmt::format("tandem:{}{{{}}} {}\n", name, labels, value);
}

void write_histogram(std::string& out, const char* name, const char* help, const Histogram& h,
                     const std::string& labels) {
  write_header(out, name, "histogram", help);
  Histogram::Snapshot s = h.snapshot();
  for (size_t i = 0; i <= s.upper_bounds.size(); ++i) {
    std::string le = i < s.upper_bounds.size() ? fmt::format("{}", s.upper_bounds[i]) : "+Inf";
    out += fmt::format("tandem:{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, s.cumulative[i]);
  }
  out += fmt::format("tandem:{}_sum{{{}}} {}\n", name, labels, s.sum);
  out += fmt::format("tandem:{}_count{{{}}} {}\n", name, labels, s.count);
}

double kv_usage(const EngineStats& s) {
  return s.kv_blocks_total > 0 ? double(s.kv_blocks_used) / double(s.kv_blocks_total) : 0.0;
}

// {"count": n, "p50": s, "p90": s, "p99": s}; the percentiles are null when n is 0.
Json latency_json(const LatencyWindow& window) {
  LatencyWindow::Summary s = window.summary();
  auto value = [](const std::optional<double>& v) { return v ? Json(*v) : Json(); };
  return {{"count", s.count}, {"p50", value(s.p50)}, {"p90", value(s.p90)}, {"p99", value(s.p99)}};
}

}  // namespace

double prefix_hit_rate(const EngineStats& s) {
  return s.prefix_cache_queries_total > 0
             ? double(s.prefix_cache_hits_total) / double(s.prefix_cache_queries_total)
             : 0.0;
}

namespace {

// Speculative decoding (vLLM's spec_decode_* counters, under our prefix).
void write_spec_decode(std::string& out, const SpecDecodeStats& s, const std::string& labels) {
  if (!s.enabled) return;
  write_header(out, "spec_decode_num_drafts_total", "counter",
               "Number of spec decoding drafts (rows that verified proposals in a step).");
  write_sample(out, "spec_decode_num_drafts_total", labels, double(s.num_drafts));
  write_header(out, "spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.");
  write_sample(out, "spec_decode_num_draft_tokens_total", labels, double(s.num_draft_tokens));
  write_header(out, "spec_decode_num_accepted_tokens_total", "counter",
               "Number of accepted tokens.");
  write_sample(out, "spec_decode_num_accepted_tokens_total", labels, double(s.num_accepted_tokens));
  write_header(out, "spec_decode_num_accepted_tokens_per_pos_total", "counter",
               "Accepted tokens per draft position.");
  for (size_t i = 0; i < s.accepted_per_position.size(); ++i)
    write_sample(out, "spec_decode_num_accepted_tokens_per_pos_total",
                 fmt::format("{},position=\"{}\"", labels, i), double(s.accepted_per_position[i]));
}

Json spec_decode_json(const SpecDecodeStats& s) {
  if (!s.enabled) return {{"enabled", false}};
  const double rate =
      s.num_draft_tokens ? double(s.num_accepted_tokens) / double(s.num_draft_tokens) : 0.0;
  const double length =
      s.num_drafts ? 1.0 + double(s.num_accepted_tokens) / double(s.num_drafts) : 0.0;
  return {{"enabled", true},
          {"method", s.method},
          {"num_speculative_tokens", s.num_speculative_tokens},
          {"drafts_total", s.num_drafts},
          {"draft_tokens_total", s.num_draft_tokens},
          {"accepted_tokens_total", s.num_accepted_tokens},
          {"acceptance_rate", rate},
          {"mean_acceptance_length", length},
          {"accepted_per_position", s.accepted_per_position},
          {"speculative_steps_total", s.num_speculative_steps},
          {"steps_read_early_total", s.num_steps_read_early}};
}

Json kv_groups_json(const EngineStats& stats) {
  Json groups = Json::array();
  for (const KvGroupStats& g : stats.kv_groups)
    groups.push_back({{"window", g.window},
                      {"total", g.total},
                      {"used", g.used},
                      {"cached", g.cached},
                      {"free", g.total - g.used}});
  return groups;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t bucket = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s{bounds_, std::vector<uint64_t>(counts_.size()), sum_, count_};
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) s.cumulative[i] = running += counts_[i];
  return s;
}

RateMeter::RateMeter(std::chrono::seconds window) : window_(window), start_(Clock::now()) {}

void RateMeter::prune(int64_t now_s) const {
  while (!buckets_.empty() && buckets_.front().first <= now_s - window_.count())
    buckets_.pop_front();
}

void RateMeter::add(int64_t n, Clock::time_point now) {
  int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
  std::lock_guard<std::mutex> lock(mu_);
  if (!buckets_.empty() && buckets_.back().first == second) {
    buckets_.back().second += n;
  } else {
    buckets_.emplace_back(second, n);
  }
  prune(second);
}

double RateMeter::per_second(Clock::time_point now) const {
  double elapsed = std::chrono::duration<double>(now - start_).count();
  std::lock_guard<std::mutex> lock(mu_);
  prune(int64_t(elapsed));
  int64_t total = 0;
  for (const auto& b : buckets_) total += b.second;
  // Young meters divide by their age, not by the whole window.
  double span = std::clamp(elapsed, 1.0, double(window_.count()));
  return double(total) / span;
}

ServerMetrics::ServerMetrics()
    : start_(Clock::now()),
      ttft_(kTtftBuckets),
      itl_(kItlBuckets),
      e2e_(kLatencyBuckets),
      queue_(kLatencyBuckets) {}

void ServerMetrics::count_finished(FinishReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_[reason == FinishReason::Cancelled ? "abort" : finish_reason_name(reason)];
}

double ServerMetrics::uptime_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

std::string ServerMetrics::prometheus(const EngineStats& stats,
                                      const std::string& model_name) const {
  std::string labels = fmt::format("model_name=\"{}\"", escape_label(model_name));
  std::string out;
  write_header(out, "num_requests_running", "gauge", "Number of requests in model execution.");
  write_sample(out, "num_requests_running", labels, stats.num_running);
  write_header(out, "num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  write_sample(out, "num_requests_waiting", labels, stats.num_waiting);
  write_header(out, "kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  write_sample(out, "kv_cache_usage_perc", labels, kv_usage(stats));
  write_header(out, "kv_blocks_total", "gauge", "KV-cache blocks in the pool.");
  write_sample(out, "kv_blocks_total", labels, double(stats.kv_blocks_total));
  write_header(out, "kv_blocks_used", "gauge", "KV-cache blocks held by sequences.");
  write_sample(out, "kv_blocks_used", labels, double(stats.kv_blocks_used));
  write_header(out, "kv_blocks_cached", "gauge",
               "KV-cache blocks no sequence holds that keep a reusable prefix (evictable).");
  write_sample(out, "kv_blocks_cached", labels, double(stats.kv_blocks_cached));
  write_header(out, "prefix_cache_queries_total", "counter",
               "Prefix cache queries, in terms of number of queried tokens.");
  write_sample(out, "prefix_cache_queries_total", labels, double(stats.prefix_cache_queries_total));
  write_header(out, "prefix_cache_hits_total", "counter",
               "Prefix cache hits, in terms of number of cached tokens.");
  write_sample(out, "prefix_cache_hits_total", labels, double(stats.prefix_cache_hits_total));
  write_header(out, "prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  write_sample(out, "prompt_tokens_total", labels, double(stats.prompt_tokens_total));
  write_header(out, "generation_tokens_total", "counter", "Number of generation tokens processed.");
  write_sample(out, "generation_tokens_total", labels, double(stats.generation_tokens_total));
  write_header(out, "num_preemptions_total", "counter", "Cumulative number of preemptions.");
  write_sample(out, "num_preemptions_total", labels, double(stats.num_preemptions));
  write_spec_decode(out, stats.spec_decode, labels);
  write_header(out, "request_success_total", "counter", "Count of finished requests.");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [reason, n] : finished_)
      write_sample(out, "request_success_total",
                   fmt::format("{},finished_reason=\"{}\"", labels, reason), double(n));
  }
  write_histogram(out, "time_to_first_token_seconds",
                  "Histogram of time to first token in seconds.", ttft_, labels);
  write_histogram(out, "inter_token_latency_seconds",
                  "Histogram of inter-token latency in seconds.", itl_, labels);
  write_histogram(out, "e2e_request_latency_seconds",
                  "Histogram of end to end request latency in seconds.", e2e_, labels);
  write_histogram(out, "request_queue_time_seconds",
                  "Histogram of time spent waiting in the queue in seconds.", queue_, labels);
  return out;
}

Json ServerMetrics::stats_json(const EngineStats& stats, const ModelInfo& model,
                               const Json& card) const {
  Json out = {{"model", model.name},
              {"uptime_s", uptime_seconds()},
              {"running", stats.num_running},
              {"waiting", stats.num_waiting},
              {"kv_blocks",
               {{"total", stats.kv_blocks_total},
                {"used", stats.kv_blocks_used},
                {"cached", stats.kv_blocks_cached},
                {"free", stats.kv_blocks_total - stats.kv_blocks_used}}},
              {"prefix_cache",
               {{"enabled", stats.prefix_cache_enabled},
                {"queries_total", stats.prefix_cache_queries_total},
                {"hits_total", stats.prefix_cache_hits_total},
                {"hit_rate", prefix_hit_rate(stats)}}},
              {"kv_cache_usage", kv_usage(stats)},
              {"prompt_tokens_total", stats.prompt_tokens_total},
              {"generation_tokens_total", stats.generation_tokens_total},
              {"requests_finished", stats.requests_finished},
              {"preemptions", stats.num_preemptions},
              {"kv_groups", kv_groups_json(stats)},
              {"speculative_decoding", spec_decode_json(stats.spec_decode)},
              {"tokens_per_second_1m", generated_tokens_per_second()},
              {"latency_1m",
               {{"ttft_s", latency_json(ttft_1m_)},
                {"itl_s", latency_json(itl_1m_)},
                {"e2e_s", latency_json(e2e_1m_)}}},
              {"max_model_len", model.max_model_len},
              {"images_encoded_total", stats.images_encoded_total},
              {"vision_encode_ms_total",
               stats.vision_encode_ms_total ? Json(*stats.vision_encode_ms_total) : Json(nullptr)}};
  if (card.is_object())
    for (auto it = card.begin(); it != card.end(); ++it) out[it.key()] = it.value();
  return out;
}

}  // namespace tandem::server
