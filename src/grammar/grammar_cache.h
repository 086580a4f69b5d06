// Compiled grammars by spec key, for one vocabulary. The server asks it for each
// constrained request (so an invalid spec is a 400 before the request reaches the engine);
// requests with the same schema share one CompiledGrammar and with it every mask already
// computed. Least recently used grammars are dropped past max_grammars (rows still using
// one keep it alive). Thread-safe; compilation runs outside the lock.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_spec.h"

namespace tandem::grammar {

struct GrammarCacheOptions {
  size_t max_grammars = 256;
  ProgramLimits program;
  GrammarLimits grammar;
};

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const TokenVocab> vocab, GrammarCacheOptions options = {});

  // The compiled grammar of spec, compiling it on a miss. Throws GrammarError.
  std::shared_ptr<CompiledGrammar> get(const GrammarSpec& spec);

  size_t size() const;
  size_t hits() const;
  size_t misses() const;

 private:
  using Lru = std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>>;

  std::shared_ptr<const TokenVocab> vocab_;
  GrammarCacheOptions options_;
  mutable std::mutex mu_;
  Lru lru_;  // most recent first
  std::unordered_map<std::string, Lru::iterator> by_key_;
  size_t hits_ = 0, misses_ = 0;
};

// Compiles spec for vocab without a cache. Throws GrammarError.
std::shared_ptr<CompiledGrammar> compile_grammar(const GrammarSpec& spec,
                                                 std::shared_ptr<const TokenVocab> vocab,
                                                 const GrammarCacheOptions& options = {});

}  // namespace tandem::grammar
