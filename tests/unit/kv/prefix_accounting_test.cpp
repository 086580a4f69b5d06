// Property test of the prefix cache over a full group and two window groups: random
// sequences join (from their longest hit), compute, grow, get preempted (and rejoin) and
// finish, while unrelated ones fill the pools and evict. Checked after every operation
// against plain models: each block's reference count equals the table entries that hold
// it; cached = free and named; and a shadow of the KV — which (position, token) every slot
// of every block holds — shows that every key a query reads is the sequence's own token at
// that position, whether the sequence computed it or found it cached.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kv/kv_block_manager.h"

namespace tandem {
namespace prefix_accounting_test {

constexpr int kBs = 4;
constexpr int32_t kNull = BlockPool::kNullBlock;

struct Slot {
  int position = -1;
  int32_t token = -1;
};
using Shadow = std::vector<std::vector<std::vector<Slot>>>;  // [G][block][slot]

struct Seq {
  std::vector<int32_t> tokens;  // every token is final here
  int num_prompt = 0;
  BlockHashChain chain{prefix_root({})};
  BlockTables tables;
  int computed = 0;
  int named = 0;
  bool running = false;
};

class Harness {
 public:
  Harness(std::vector<KvLayerKind> layers, std::vector<int> blocks)
      : kv_(make_kv_groups(layers), blocks, kBs, true) {
    for (int n : blocks) shadow_.emplace_back(size_t(n), std::vector<Slot>(kBs));
  }
  KvBlockManager& kv() { return kv_; }

  bool admit(Seq& s, int chunk) {
    s.chain.extend(s.tokens, kBs);
    const int n = int(s.tokens.size());
    PrefixHit hit = kv_.find_prefix(s.chain, s.tokens, (n - 1) / kBs);
    const int start = hit.num_blocks * kBs, end = std::min(n, start + chunk);
    std::optional<GrowPlan> plan = kv_.plan_admit(hit, end, n);
    if (!plan) return false;
    kv_.apply(s.tables, *plan);
    s.computed = start;
    s.named = hit.num_blocks;
    s.running = true;
    compute(s, end);
    return true;
  }
  bool step(Seq& s, int chunk) {
    name(s);
    kv_.release_out_of_window(s.tables, s.computed, s.num_prompt / kBs);
    const int end = std::min(int(s.tokens.size()), s.computed + chunk);
    std::optional<GrowPlan> plan = kv_.plan_grow(s.tables, s.computed, end);
    if (!plan) return false;
    kv_.apply(s.tables, *plan);
    compute(s, end);
    return true;
  }
  void release(Seq& s) {
    name(s);
    kv_.release(s.tables);
    s.computed = s.named = 0;
    s.running = false;
  }
  // Every used block is held by exactly as many table entries as its reference count.
  void check(const std::vector<Seq>& seqs) const {
    for (int g = 0; g < kv_.num_groups(); g++) {
      std::map<int32_t, int> owners;
      for (const Seq& s : seqs)
        if (!s.tables.empty())
          for (int32_t b : s.tables[size_t(g)])
            if (b != kNull) owners[b]++;
      const BlockPool& pool = kv_.pool(g);
      ASSERT_EQ(int(owners.size()), pool.num_used()) << "group " << g;
      int cached = 0;
      for (int32_t b = 1; b < pool.num_blocks(); b++) {
        auto it = owners.find(b);
        ASSERT_EQ(pool.ref_count(b), it == owners.end() ? 0 : it->second) << "block " << b;
        cached += pool.ref_count(b) == 0 && pool.named(b);
      }
      ASSERT_EQ(cached, pool.num_cached()) << "group " << g;
    }
  }

 private:
  void name(Seq& s) {
    const int end = std::min(s.computed / kBs, s.chain.size());
    kv_.cache_blocks(s.tables, s.chain, s.tokens, s.named, end);
    s.named = std::max(s.named, end);
  }
  // Writes positions [computed, end) and checks every key their queries read.
  void compute(Seq& s, int end) {
    for (int p = s.computed; p < end; p++) {
      for (int g = 0; g < kv_.num_groups(); g++)
        shadow_[size_t(g)][size_t(s.tables[size_t(g)][size_t(p / kBs)])][size_t(p % kBs)] = {p, s.tokens[size_t(p)]};
      for (int g = 0; g < kv_.num_groups(); g++) {
        const int window = kv_.groups().groups[size_t(g)].window;
        for (int key = window ? std::max(0, p - window + 1) : 0; key <= p; key++) {
          const int32_t b = s.tables[size_t(g)][size_t(key / kBs)];
          ASSERT_NE(b, kNull) << "group " << g << " key " << key << " of query " << p;
          const Slot slot = shadow_[size_t(g)][size_t(b)][size_t(key % kBs)];
          ASSERT_EQ(slot.position, key) << "group " << g << " query " << p;
          ASSERT_EQ(slot.token, s.tokens[size_t(key)]) << "group " << g << " query " << p;
        }
      }
    }
    s.computed = end;
  }

  KvBlockManager kv_;
  Shadow shadow_;
};

// Prompts from a few shared stems, so hits (and partial hits) are common.
std::vector<int32_t> random_prompt(std::mt19937& rng) {
  const int stem = int(rng() % 3), shared = int(rng() % 30), extra = 1 + int(rng() % 20);
  std::vector<int32_t> out;
  for (int i = 0; i < shared; i++) out.push_back(stem * 1000 + i);
  for (int i = 0; i < extra; i++) out.push_back(int32_t(rng() % 50));
  return out;
}

TEST(PrefixAccounting, RandomJoinFinishPreemptEvictKeepsTheBooksAndTheKv) {
  for (uint32_t seed : {11u, 12u, 13u, std::random_device{}()}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    // Full, window 6 (with a layer sharing its KV), window 9.
    Harness h({{0}, {6}, {0}, {9}, {6, 1}}, {40, 22, 26});
    std::vector<Seq> seqs(6);
    int hits = 0;
    for (int op = 0; op < 4000; op++) {
      Seq& s = seqs[rng() % seqs.size()];
      const int chunk = 1 + int(rng() % 9);
      if (!s.running) {
        if (s.tokens.empty() || rng() % 3 == 0) {  // a new request (else a preempted one rejoins)
          s = Seq{};
          s.tokens = random_prompt(rng);
          s.num_prompt = int(s.tokens.size());
        }
        if (h.admit(s, chunk)) hits += s.computed > chunk;
      } else if (rng() % 10 == 0) {  // finishes, or is preempted (tokens kept to rejoin)
        const bool preempted = rng() % 2;
        h.release(s);
        if (!preempted) s.tokens.clear();
      } else if (s.computed == int(s.tokens.size())) {  // decodes: one more final token
        s.tokens.push_back(int32_t(rng() % 50));
        if (!h.step(s, chunk)) h.release(s);
      } else if (!h.step(s, chunk)) {
        h.release(s);  // preempted for lack of blocks
      }
      if (HasFatalFailure()) return;
      h.check(seqs);
      if (HasFatalFailure()) return;
    }
    for (Seq& s : seqs)
      if (s.running) h.release(s);
    EXPECT_EQ(h.kv().num_used(), 0);
    EXPECT_GT(hits, 20) << "the workload should hit the cache";
  }
}

}  // namespace prefix_accounting_test
}  // namespace tandem
