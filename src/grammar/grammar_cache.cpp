#include "grammar/grammar_cache.h"

namespace tandem::grammar {

std::shared_ptr<CompiledGrammar> compile_grammar(const GrammarSpec& spec,
                                                 std::shared_ptr<const TokenVocab> vocab,
                                                 const GrammarCacheOptions& options) {
  return std::make_shared<CompiledGrammar>(compile_program(spec, options.program), std::move(vocab),
                                           spec.key(), options.grammar);
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocab> vocab, GrammarCacheOptions options)
    : vocab_(std::move(vocab)), options_(options) {}

std::shared_ptr<CompiledGrammar> GrammarCache::get(const GrammarSpec& spec) {
  std::string key = spec.key();
  {
    std::lock_guard lock(mu_);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    ++misses_;
  }
  std::shared_ptr<CompiledGrammar> compiled = compile_grammar(spec, vocab_, options_);
  std::lock_guard lock(mu_);
  if (auto it = by_key_.find(key); it != by_key_.end())
    return it->second->second;  // a racing compile won
  lru_.emplace_front(key, compiled);
  by_key_[key] = lru_.begin();
  while (lru_.size() > options_.max_grammars) {
    by_key_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
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
