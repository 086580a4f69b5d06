// The prefix-cache gate (issue 19) through `tandem serve --batch 8`, on every oracle
// folder a server can load (each one with a tokenizer: fixtures added later join by
// themselves): requests that share a 120-token prefix with an earlier one, sent at once
// (greedy and seeded), and the three turns of a chat come back with exactly the tokens of
// the same requests on a server with --no-enable-prefix-caching — with steps of 2048
// tokens, with --max-batched-tokens 16 (chunked prompts), and under a KV budget so small
// that rows are preempted and recomputed (eight rows growing at once). They report cached_tokens ≥ 64 for the shared
// prefix and nearly all of the first two turns on the third; afterwards no block is
// used and the cached ones are free.
#include <gtest/gtest.h>

#include <latch>
#include <memory>
#include <optional>
#include <thread>

#include "../unit/cli/local_server.h"
#include "engine/kv_layout.h"
#include "oracle_fixture.h"

namespace tandem::test {
namespace prefix_cache_gate_test {

using server::Json;

enum class Variant { Plain, Chunked, Tight };

struct GateCase {
  std::string arch;
  Variant variant;
};

std::vector<std::string> servable_archs() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(oracle_dir("")))
    if (std::filesystem::exists(e.path() / "tokenizer.json") &&
        std::filesystem::exists(e.path() / "golden.safetensors"))
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

EngineConfig base_config(const GateCase& c, bool caching) {
  EngineConfig config;
  config.scheduler.max_rows = 8;
  config.scheduler.max_batched_tokens = c.variant == Variant::Chunked ? 16 : 2048;
  config.max_model_len = 256;
  config.served_model_name = c.arch;
  config.enable_prefix_caching = caching;
  return config;
}

// The smallest budget (in steps of one block over all layers) under which one sequence
// of `tokens` fits with caching on and off: eight at once must take turns.
int64_t tight_budget(const std::string& arch, int tokens) {
  cli::LoadedModel m = cli::load_model_folder(oracle_dir(arch));
  const std::vector<LayerKvSpec> specs = m.model->kv_specs();
  const int64_t step = kv_bytes_per_block(specs, 16, DType::F32);
  for (int64_t budget = step;; budget += step) {
    bool fits = true;
    for (bool caching : {false, true}) {
      KvSizing s{.block_size = 16, .max_rows = 8, .max_batched_tokens = 2048,
                 .max_model_len = 256, .budget_bytes = budget, .prefix_caching = caching};
      fits = fits && make_kv_block_manager(specs, DType::F32, s).max_sequence_tokens() >= tokens;
    }
    if (fits) return budget;
  }
}

struct Request {
  std::vector<int32_t> prompt;
  std::optional<uint64_t> seed;  // sampled at temperature 1 when set, else greedy
  int max_tokens = 16;
};

struct Reply {
  std::vector<int32_t> tokens;
  int cached_tokens = -1;
};

// The parsed answer of POST /v1/completions, or a test failure (and nullopt) when it is not a 200.
std::optional<Json> post_completion(int port, const Json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto res = client.Post("/v1/completions", body.dump(), "application/json");
  if (!res || res->status != 200) {
    ADD_FAILURE() << "HTTP " << (res ? res->status : 0) << " " << (res ? res->body : "");
    return std::nullopt;
  }
  return Json::parse(res->body);
}

Reply post(int port, const Request& r) {
  Json body = {{"prompt", r.prompt}, {"max_tokens", r.max_tokens}, {"ignore_eos", true},
               {"return_token_ids", true}, {"temperature", r.seed ? 1.0 : 0.0}};
  if (r.seed) body["seed"] = *r.seed;
  const std::optional<Json> j = post_completion(port, body);
  if (!j) return {};
  return {(*j)["choices"][0]["token_ids"].get<std::vector<int32_t>>(),
          (*j)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>()};
}

std::vector<Reply> post_together(int port, const std::vector<Request>& reqs) {
  std::vector<Reply> replies(reqs.size());
  std::latch start(std::ptrdiff_t(reqs.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reqs.size(); ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      replies[i] = post(port, reqs[i]);
    });
  for (auto& t : threads) t.join();
  return replies;
}

// One request holding several prompts (seeded, at temperature 1): its choices in prompt order.
std::vector<Reply> post_prompts(int port, const std::vector<std::vector<int32_t>>& prompts,
                                int max_tokens, uint64_t seed) {
  const std::optional<Json> j = post_completion(
      port, {{"prompt", prompts}, {"max_tokens", max_tokens}, {"ignore_eos", true},
             {"return_token_ids", true}, {"temperature", 1.0}, {"seed", seed}});
  if (!j) return {};
  std::vector<Reply> out(prompts.size());
  for (const Json& choice : (*j)["choices"])
    out.at(choice["index"].get<size_t>()).tokens = choice["token_ids"].get<std::vector<int32_t>>();
  return out;
}

// Token ids the model knows: the oracle's prompts, cycled from `offset`.
std::vector<int32_t> oracle_tokens(const std::vector<OraclePrompt>& prompts, int n, int offset) {
  std::vector<int32_t> pool;
  for (const OraclePrompt& p : prompts) pool.insert(pool.end(), p.prompt.begin(), p.prompt.end());
  std::vector<int32_t> out;
  for (int i = 0; i < n; i++) out.push_back(pool[size_t(offset + i * 7) % pool.size()]);
  return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class PrefixCacheGate : public ::testing::TestWithParam<GateCase> {};

TEST_P(PrefixCacheGate, HitsChangeNoTokenAndFreeEverything) {
  const GateCase& c = GetParam();
  const std::vector<OraclePrompt> oracle = load_oracle(c.arch);
  ASSERT_FALSE(oracle.empty());
  EngineConfig on = base_config(c, true), off = base_config(c, false);
  if (c.variant == Variant::Tight) on.kv_budget_bytes = off.kv_budget_bytes = tight_budget(c.arch, 160);
  LocalServer cached(oracle_dir(c.arch), on), plain(oracle_dir(c.arch), off);

  // A shared 120-token prefix: one request first, then seven sharers at once.
  const std::vector<int32_t> shared = oracle_tokens(oracle, 120, 0);
  std::vector<Request> sharers;
  for (int i = 1; i <= 7; i++)
    sharers.push_back({concat(shared, oracle_tokens(oracle, 3 + i, 11 * i)),
                       i % 2 ? std::nullopt : std::optional<uint64_t>(100 + i)});
  const Request first{concat(shared, oracle_tokens(oracle, 5, 3)), std::nullopt};
  EXPECT_EQ(post(cached.port(), first).tokens, post(plain.port(), first).tokens);
  const std::vector<Reply> got = post_together(cached.port(), sharers);
  const std::vector<Reply> want = post_together(plain.port(), sharers);
  for (size_t i = 0; i < sharers.size(); i++) {
    SCOPED_TRACE("sharer " + std::to_string(i));
    EXPECT_EQ(got[i].tokens, want[i].tokens);
    EXPECT_GE(got[i].cached_tokens, 64);
    EXPECT_EQ(want[i].cached_tokens, 0);
  }

  // Three turns of a chat: each resends the history and its reply, plus a new turn.
  std::vector<int32_t> history = oracle_tokens(oracle, 40, 5);
  for (int turn = 0; turn < 3; turn++) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    const Reply r = post(cached.port(), {history, std::nullopt});
    EXPECT_EQ(r.tokens, post(plain.port(), {history, std::nullopt}).tokens);
    const int before = int(history.size());
    history = concat(concat(history, r.tokens), oracle_tokens(oracle, 8, 17 * turn));
    // The last reply token's K/V is never computed: at most its block is recomputed.
    if (turn == 2) {
      EXPECT_GE(r.cached_tokens, before - 8 - 16);
    }
  }

  // Eight short prompts (one shared block) growing to 84 tokens each, in one request (the
  // server submits its prompts together, so they run at once however the test's threads
  // are scheduled): under the tight budget they preempt each other, and the preempted
  // recompute from their cache. Sampled, so recomputation must also restore each row's
  // random stream.
  std::vector<std::vector<int32_t>> growers;
  for (int i = 0; i < 8; i++)
    growers.push_back(concat(oracle_tokens(oracle, 16, 1), oracle_tokens(oracle, 4, 13 * i)));
  const std::vector<Reply> grown = post_prompts(cached.port(), growers, 64, 7);
  const std::vector<Reply> grown_plain = post_prompts(plain.port(), growers, 64, 7);
  ASSERT_EQ(grown.size(), growers.size());
  ASSERT_EQ(grown_plain.size(), growers.size());
  for (size_t i = 0; i < growers.size(); i++)
    EXPECT_EQ(grown[i].tokens, grown_plain[i].tokens) << "grower " << i;

  for (LocalServer* s : {&cached, &plain}) {
    Json stats = s->settled_stats();
    ASSERT_TRUE(stats.is_object());
    EXPECT_EQ(stats["kv_blocks"]["used"], 0) << stats.dump();
    EXPECT_EQ(stats["kv_blocks"]["free"], stats["kv_blocks"]["total"]) << stats.dump();
    if (c.variant == Variant::Tight) {
      EXPECT_GT(stats["preemptions"].get<int>(), 0) << stats.dump();
    }
  }
  Json stats = cached.settled_stats();
  EXPECT_GT(stats["kv_blocks"]["cached"].get<int>(), 0) << stats.dump();
  EXPECT_GT(stats["prefix_cache"]["hits_total"].get<int>(), 7 * 64) << stats.dump();
  EXPECT_EQ(plain.settled_stats()["kv_blocks"]["cached"], 0);
}

std::string variant_name(Variant v) {
  switch (v) {
    case Variant::Plain: return "plain";
    case Variant::Chunked: return "chunked16";
    case Variant::Tight: return "tight_kv";
  }
  return "unknown";
}

std::vector<GateCase> cases() {
  std::vector<GateCase> out;
  for (const std::string& arch : servable_archs())
    for (Variant v : {Variant::Plain, Variant::Chunked, Variant::Tight}) out.push_back({arch, v});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Architectures, PrefixCacheGate, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.arch + "_" + variant_name(info.param.variant);
                         });

}  // namespace prefix_cache_gate_test
}  // namespace tandem::test
