// Compiled grammars by spec key, for one vocabulary. The server asks it for each
// constrained request on the request's HTTP thread (so an invalid spec is a 400, and the
// compile's CPU time is spent, before the request reaches the engine thread); requests with
// the same spec share one CompiledGrammar and with it every mask already computed.
//
// What it caches, keyed by GrammarSpec::key() (the spec's full canonical text, so equal
// keys are equal grammars): the compiled grammar with its automaton and masks, its start
// state's mask computed at compile time (the engine's first step for a new spec is then a
// copy); and, apart, the errors of refused specs (up to 64 KiB of text each), so a client
// that repeats a bad spec costs a key and a lookup, not a compile. Least recently used
// entries are dropped past max_grammars / max_errors (rows using a grammar keep it alive).
//
// Compile cost is bounded before and during compilation: a spec's text past max_spec_bytes
// is refused before it is parsed, and the program (ProgramLimits::max_insts) and automaton
// (GrammarLimits) have their own limits; every refusal names the `tandem serve` flag that
// sets it. Compilation is linear in the spec's size (bench: a 1 MiB GBNF grammar of 30,000
// rules compiles in about 0.3 s on one core). Thread-safe; compilation runs outside the lock.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_error.h"
#include "grammar/grammar_spec.h"

namespace tandem::grammar {

struct GrammarCacheOptions {
  size_t max_grammars = 256;
  size_t max_errors = 64;  // refused specs remembered
  // --max-grammar-bytes: a spec's canonical text, its key (GBNF or regex text, a schema as
  // compact JSON, the choices, with a few bytes of header), checked before any parsing.
  size_t max_spec_bytes = size_t(1) << 20;
  ProgramLimits program;
  GrammarLimits grammar;
};

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const TokenVocab> vocab, GrammarCacheOptions options = {});

  // The compiled grammar of spec, compiling it on a miss. Throws GrammarError (a remembered
  // one for a spec refused before).
  std::shared_ptr<CompiledGrammar> get(const GrammarSpec& spec);

  size_t size() const;  // compiled grammars held
  size_t num_errors() const;
  size_t hits() const;  // compiled grammars and remembered errors alike
  size_t misses() const;

 private:
  // Most recent first; an entry holds a grammar or the error that refused its spec.
  template <typename T>
  struct Lru {
    std::list<std::pair<std::string, T>> order;
    std::unordered_map<std::string, typename std::list<std::pair<std::string, T>>::iterator> by_key;
    const T* find(const std::string& key);
    void put(std::string key, T value, size_t capacity);
  };

  std::shared_ptr<const TokenVocab> vocab_;
  GrammarCacheOptions options_;
  mutable std::mutex mu_;
  Lru<std::shared_ptr<CompiledGrammar>> grammars_;
  Lru<GrammarError> errors_;
  size_t hits_ = 0, misses_ = 0;
};

// Compiles spec for vocab without a cache (the size check included), and computes its start
// state's mask. Throws GrammarError.
std::shared_ptr<CompiledGrammar> compile_grammar(const GrammarSpec& spec,
                                                 std::shared_ptr<const TokenVocab> vocab,
                                                 const GrammarCacheOptions& options = {});

}  // namespace tandem::grammar
