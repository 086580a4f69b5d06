// Property tests of the KV pools' accounting: long random runs of allocate / release /
// add_ref (BlockPool) and plan_grow / apply / release_out_of_window / release
// (KvBlockManager), each step checked against a plain model — a list in eviction order
// and a reference count per block; tables whose blocks each belong to exactly one owner.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <random>

#include "core/error.h"
#include "kv/kv_block_manager.h"

namespace tandem {
namespace pool_accounting_test {

// The pool as a list and a map: what BlockPool must agree with after every operation.
struct PoolModel {
  std::list<int32_t> free;     // head first
  std::map<int32_t, int> refs;  // allocated blocks only

  explicit PoolModel(int num_blocks) {
    for (int32_t b = 1; b < num_blocks; b++) free.push_back(b);
  }
  std::vector<int32_t> allocate(int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; i++) {
      out.push_back(free.front());
      refs[free.front()] = 1;
      free.pop_front();
    }
    return out;
  }
  void add_ref(int32_t b) {
    if (refs[b]++ == 0) free.remove(b);
  }
  void release(int32_t b) {
    if (--refs[b] == 0) {
      refs.erase(b);
      free.push_back(b);
    }
  }
};

void expect_agree(const BlockPool& pool, const PoolModel& m, int step) {
  ASSERT_EQ(pool.num_free(), int(m.free.size())) << "step " << step;
  ASSERT_EQ(pool.free_blocks(), std::vector<int32_t>(m.free.begin(), m.free.end())) << "step " << step;
  for (int32_t b = 1; b < pool.num_blocks(); b++) {
    auto it = m.refs.find(b);
    ASSERT_EQ(pool.ref_count(b), it == m.refs.end() ? 0 : it->second) << "block " << b << " step " << step;
  }
}

TEST(PoolAccounting, BlockPoolMatchesAListAndRefCounts) {
  for (uint32_t seed : {1u, 2u, 3u, std::random_device{}()}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const int N = 2 + int(rng() % 40);
    BlockPool pool(N);
    PoolModel model(N);
    std::vector<int32_t> held;  // one entry per reference the test owns
    for (int step = 0; step < 3000; step++) {
      const int op = int(rng() % 4);
      if (op == 0) {  // allocate what fits (sometimes more: refused)
        const int n = int(rng() % 5);
        ASSERT_EQ(pool.can_allocate(n), n <= int(model.free.size()));
        if (!pool.can_allocate(n)) continue;
        std::vector<int32_t> got = pool.allocate(n);
        ASSERT_EQ(got, model.allocate(n)) << "step " << step;
        held.insert(held.end(), got.begin(), got.end());
      } else if (op == 1 && !held.empty()) {  // release a random batch, in a random order
        std::shuffle(held.begin(), held.end(), rng);
        const size_t n = 1 + rng() % std::min<size_t>(held.size(), 4);
        std::vector<int32_t> batch(held.end() - long(n), held.end());
        held.resize(held.size() - n);
        pool.release(batch);
        for (int32_t b : batch) model.release(b);
      } else if (op == 2) {  // another owner of any block, held or free (a cache hit)
        const int32_t b = 1 + int32_t(rng() % uint32_t(N - 1));
        pool.add_ref(b);
        model.add_ref(b);
        held.push_back(b);
      } else if (op == 3 && !held.empty()) {  // a release in table order, one by one
        const int32_t b = held.back();
        held.pop_back();
        pool.release(std::vector<int32_t>{b});
        model.release(b);
      }
      expect_agree(pool, model, step);
    }
    pool.release(held);
    EXPECT_EQ(pool.num_free(), pool.capacity());
    EXPECT_THROW(pool.add_ref(BlockPool::kNullBlock), Error);
    EXPECT_THROW(pool.release(std::vector<int32_t>{1}), Error);  // nothing holds it now
  }
}

// Random sequences growing, sliding and finishing over a full group and a window group.
TEST(PoolAccounting, BlockManagerTablesOwnEveryUsedBlockOnce) {
  const int bs = 4, window = 9;
  for (uint32_t seed : {4u, 5u, std::random_device{}()}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    std::vector<KvLayerKind> layers{{0}, {window}};
    KvBlockManager kv(make_kv_groups(layers), std::vector<int>{40, 16}, bs);
    struct Seq {
      BlockTables tables;
      int computed = 0;
    };
    std::vector<Seq> seqs(5);
    for (int step = 0; step < 2000; step++) {
      Seq& s = seqs[rng() % seqs.size()];
      if (rng() % 8 == 0) {  // finishes: its blocks return, last block first
        std::vector<int32_t> full = s.tables.empty() ? std::vector<int32_t>{} : s.tables[0];
        std::erase(full, BlockPool::kNullBlock);
        kv.release(s.tables);
        s.computed = 0;
        std::vector<int32_t> tail = kv.pool(0).free_blocks();
        ASSERT_GE(tail.size(), full.size());
        tail.erase(tail.begin(), tail.end() - long(full.size()));
        std::reverse(full.begin(), full.end());
        ASSERT_EQ(tail, full) << "the prefix is evicted last";
      } else {  // computes 1..6 more tokens, if the pools allow
        kv.release_out_of_window(s.tables, s.computed);
        const int n = 1 + int(rng() % 6);
        const std::optional<GrowPlan> plan = kv.plan_grow(s.tables, s.computed, s.computed + n);
        const int free0 = kv.pool(0).num_free(), free1 = kv.pool(1).num_free();
        if (!plan) continue;
        ASSERT_LE(plan->groups[0].num_new, free0);
        ASSERT_LE(plan->groups[1].num_new, free1);
        kv.apply(s.tables, *plan);
        ASSERT_EQ(kv.pool(0).num_free() + kv.pool(1).num_free(),
                  free0 + free1 - plan->num_new_blocks());
        s.computed += n;
        for (int g = 0; g < 2; g++)
          ASSERT_EQ(int(s.tables[size_t(g)].size()), blocks_for(s.computed, bs)) << "group " << g;
      }
      // Every block a pool counts as used sits in exactly one table entry.
      for (int g = 0; g < 2; g++) {
        std::map<int32_t, int> owners;
        for (const Seq& q : seqs)
          if (!q.tables.empty())
            for (int32_t b : q.tables[size_t(g)])
              if (b != BlockPool::kNullBlock) owners[b]++;
        ASSERT_EQ(int(owners.size()), kv.pool(g).num_used()) << "group " << g << " step " << step;
        for (auto [b, n] : owners) ASSERT_EQ(n, 1) << "block " << b << " of group " << g;
      }
    }
  }
}

}  // namespace pool_accounting_test
}  // namespace tandem
