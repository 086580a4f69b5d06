// Structured output: the grammar engine. A request's spec (a JSON Schema, any JSON object,
// a regex, a list of choices or a GBNF grammar) is compiled once into a pushdown automaton
// over bytes; each constrained row carries a Matcher that follows the tokens it emits and
// says which tokens may come next, as a bitmask over the vocabulary.
//
// How the engine and the server use it (phase 2 of issue 21; engine.h has the overlap rule):
//
//   // once per tokenizer: the bytes of every token id (byte-level BPE decoded), the
//   // special tokens, the EOS ids; sized to the logits' width
//   auto vocab = std::make_shared<const TokenVocab>(TokenVocabParams{bytes, special, eos});
//   GrammarCache cache(vocab);
//
//   // HTTP thread, while validating the request: a GrammarError here is a 400 that names
//   // e.path() (a JSON pointer into the schema, or a line and column) and e.keyword()
//   std::shared_ptr<CompiledGrammar> g = cache.get(GrammarSpec::json_schema(schema));
//   g->fill_mask(g->start_state(), words);  // optional: warms the first step's mask
//
//   // engine thread, per constrained row
//   Matcher m(g);
//   std::vector<uint32_t> words(vocab->num_mask_words());
//   m.fill_mask(words);            // before sampling: bit id of words[id / 32]
//   ... apply on the device, sample token t ...
//   m.accept_token(t);             // after sampling (false only if t broke the mask)
//   if (m.must_end()) ...          // only EOS is allowed next
//   if (m.is_finished()) ...       // EOS was taken
//
// The vocabulary: token_bytes[id] is what the token adds to the output:
// Tokenizer::token_bytes() (byte-level BPE, byte-fallback <0xNN> and "▁" SentencePiece
// tokens alike), padded to the logits' width; the server builds it once per model
// (server/structured_output.h, make_grammar_cache).
//
// Errors at run time: the automaton is built as rows advance, under limits
// (AutomatonLimits: parses alive at once, bytes of states). A grammar that outgrows them
// makes accept_token/fill_mask throw GrammarError; the engine should fail that row (its
// output so far is still a valid prefix), never drop the mask.
//
// Guarantees: every token a mask allows keeps the output a prefix of some complete output
// (no dead ends); EOS is allowed exactly when the output is complete; special tokens never
// are. So a row whose sampler honours the mask ends with a valid output, or runs out of
// max_tokens ("length"). A spec feature that cannot be enforced is a GrammarError, never a
// silently looser grammar.
//
// Cost: masks are cached per automaton state (a state is the whole parse, stack included,
// so a cached mask is exact). The first row to reach a state walks the vocabulary trie
// once (tens to hundreds of microseconds, a few milliseconds for states that allow most of
// the vocabulary); every later row in that state copies the cached mask out (a few
// microseconds for a 151k vocabulary). bench/grammar_bench measures both.
//
// Threads: GrammarCache is thread-safe; a CompiledGrammar serializes its callers (rows of
// one grammar take turns, different grammars run in parallel); a Matcher is one row's.
//
// The pieces, bottom up:
//   grammar_ir.h       the common grammar (rules over bytes) every front end emits
//   json_schema.h      JSON Schema (the supported keywords are listed there)
//   regex.h, gbnf.h    regexes and llama.cpp's GBNF
//   program.h          the grammar as a pushdown NFA program (checked: no dead ends,
//                      no left recursion)
//   automaton.h        the program determinized lazily, a state per parse configuration
//   token_vocab.h      the vocabulary and its byte trie
//   mask_cache.h       token masks per state
//   compiled_grammar.h program + automaton + masks for one vocabulary
//   grammar_spec.h     the request-side description and its cache key
//   grammar_cache.h    compiled grammars by key
//   matcher.h          one row's state
#pragma once

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_error.h"
#include "grammar/grammar_spec.h"
#include "grammar/matcher.h"
#include "grammar/token_vocab.h"
