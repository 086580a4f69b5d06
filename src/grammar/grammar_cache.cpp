#include "grammar/grammar_cache.h"

#include <vector>

namespace tandem::grammar {

namespace {

// Errors are remembered only for specs this small: the memory they hold stays bounded
// (max_errors of them), and a larger refused spec costs at most one bounded compile again.
constexpr size_t kMaxRememberedKeyBytes = size_t(64) << 10;

std::shared_ptr<CompiledGrammar> compile_checked(const GrammarSpec& spec, std::string key,
                                                 std::shared_ptr<const TokenVocab> vocab,
                                                 const GrammarCacheOptions& options) {
  if (key.size() > options.max_spec_bytes)
    grammar_fail("", "",
                 "the grammar is {} bytes, over the limit of {} bytes (--max-grammar-bytes)",
                 key.size(), options.max_spec_bytes);
  auto g = std::make_shared<CompiledGrammar>(compile_program(spec, options.program),
                                             std::move(vocab), std::move(key), options.grammar);
  // The start state's mask, now, on the compiling thread: a new spec's first step on the
  // engine thread is then a copy from the mask cache.
  std::vector<uint32_t> words(g->vocab().num_mask_words());
  g->fill_mask(g->start_state(), words);
  return g;
}

}  // namespace

std::shared_ptr<CompiledGrammar> compile_grammar(const GrammarSpec& spec,
                                                 std::shared_ptr<const TokenVocab> vocab,
                                                 const GrammarCacheOptions& options) {
  return compile_checked(spec, spec.key(), std::move(vocab), options);
}

template <typename T>
const T* GrammarCache::Lru<T>::find(const std::string& key) {
  auto it = by_key.find(key);
  if (it == by_key.end()) return nullptr;
  order.splice(order.begin(), order, it->second);
  return &it->second->second;
}

template <typename T>
void GrammarCache::Lru<T>::put(std::string key, T value, size_t capacity) {
  if (by_key.contains(key) || capacity == 0) return;  // a racing compile got there first
  order.emplace_front(key, std::move(value));
  by_key.emplace(std::move(key), order.begin());
  while (order.size() > capacity) {
    by_key.erase(order.back().first);
    order.pop_back();
  }
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocab> vocab, GrammarCacheOptions options)
    : vocab_(std::move(vocab)), options_(options) {}

std::shared_ptr<CompiledGrammar> GrammarCache::get(const GrammarSpec& spec) {
  std::string key = spec.key();
  {
    std::lock_guard lock(mu_);
    if (const auto* g = grammars_.find(key)) {
      ++hits_;
      return *g;
    }
    if (const GrammarError* e = errors_.find(key)) {
      ++hits_;
      throw *e;
    }
    ++misses_;
  }
  try {
    std::shared_ptr<CompiledGrammar> compiled = compile_checked(spec, key, vocab_, options_);
    std::lock_guard lock(mu_);
    if (const auto* g = grammars_.find(key)) return *g;  // a racing compile won
    grammars_.put(std::move(key), compiled, options_.max_grammars);
    return compiled;
  } catch (const GrammarError& e) {
    if (key.size() <= kMaxRememberedKeyBytes) {
      std::lock_guard lock(mu_);
      errors_.put(std::move(key), e, options_.max_errors);
    }
    throw;
  }
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return grammars_.order.size();
}

size_t GrammarCache::num_errors() const {
  std::lock_guard lock(mu_);
  return errors_.order.size();
}

size_t GrammarCache::hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}

size_t GrammarCache::misses() const {
  std::lock_guard lock(mu_);
  return misses_;
}

}  // namespace tandem::grammar
