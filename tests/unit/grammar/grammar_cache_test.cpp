// The compiled-grammar cache (keys, LRU, errors), the automaton's limits, and matchers of
// one grammar used from several threads at once.
#include <fmt/format.h>

#include <thread>

#include "grammar/grammar_error.h"
#include "grammar_test_support.h"
#include "walk_support.h"

namespace tandem::grammar::test {
namespace grammar_cache_test {

TEST(GrammarCache, SameSpecSameGrammarLruDropsTheOldest) {
  GrammarCacheOptions options;
  options.max_grammars = 2;
  GrammarCache cache(byte_vocab(), options);
  auto a = cache.get(GrammarSpec::regex("a+"));
  EXPECT_EQ(cache.get(GrammarSpec::regex("a+")), a);
  EXPECT_EQ(cache.hits(), 1u);
  // Schemas that differ only in property order are different grammars.
  auto ab = cache.get(schema_spec(R"({"properties":{"a":{},"b":{}}})"));
  auto ba = cache.get(schema_spec(R"({"properties":{"b":{},"a":{}}})"));
  EXPECT_NE(ab, ba);
  EXPECT_EQ(cache.size(), 2u);
  // "a+" was the least recently used: it was dropped, but the row holding it keeps it.
  EXPECT_NE(cache.get(GrammarSpec::regex("a+")), a);
  EXPECT_TRUE(Matcher(a).accept_bytes("aaa"));
  EXPECT_EQ(cache.misses(), 4u);
}

TEST(GrammarCache, KeysTellSpecsApart) {
  EXPECT_NE(GrammarSpec::choice({"a:b"}).key(), GrammarSpec::choice({"a", "b"}).key());
  EXPECT_NE(GrammarSpec::regex("x").key(), GrammarSpec::gbnf("x").key());
  EXPECT_NE(GrammarSpec::json_object().key(),
            GrammarSpec::json_object({.max_whitespace = 1}).key());
  EXPECT_EQ(schema_spec(R"({"type": "string"})").key(), schema_spec(R"({"type":"string"})").key());
}

// A prefix and suffix (a forced tool call's tags) wrap the output of any kind of spec.
TEST(GrammarSpecWrap, PrefixAndSuffixSurroundTheOutput) {
  GrammarSpec call = schema_spec(R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
  call.prefix = "<tool_call>\n";
  call.suffix = "\n</tool_call>";
  EXPECT_TRUE(accepts(call, "<tool_call>\n{\"n\":12}\n</tool_call>"));
  EXPECT_FALSE(accepts(call, "{\"n\":12}"));
  EXPECT_FALSE(accepts(call, "<tool_call>\n{\"n\":12}"));
  GrammarSpec choice = GrammarSpec::choice({"a", "b"});
  choice.prefix = "[";
  EXPECT_TRUE(accepts(choice, "[b"));
  EXPECT_FALSE(accepts(choice, "b"));
  GrammarSpec plain = GrammarSpec::choice({"a", "b"});
  EXPECT_NE(plain.key(), choice.key());
  GrammarSpec suffixed = GrammarSpec::choice({"a", "b"});
  suffixed.suffix = "[";
  EXPECT_NE(suffixed.key(), choice.key());
}

// A refused spec is refused every time, the second time from memory.
TEST(GrammarCache, ErrorsAreRememberedAndThrownEveryTime) {
  GrammarCache cache(byte_vocab());
  std::string first;
  for (int i = 0; i < 2; ++i) {
    try {
      cache.get(GrammarSpec::regex("("));
      ADD_FAILURE() << "no error";
    } catch (const GrammarError& e) {
      if (i == 0) first = e.what();
      EXPECT_EQ(e.what(), first);
    }
  }
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.num_errors(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
}

// A grammar past --max-grammar-bytes is refused before parsing, naming the flag; one of
// 100,000 rules (3.4 MB) is refused at once, and compiling stays linear below the limit.
TEST(GrammarLimits, SpecSizeIsBoundedAndCompilingIsLinear) {
  std::string big = "root ::= r0\n";
  for (int i = 0; i < 100000; ++i)
    big += fmt::format("r{} ::= \"tok{}\" r{} | \"end\"\n", i, i % 97, i + 1);
  big += "r100000 ::= \"x\"\n";
  try {
    compile_grammar(GrammarSpec::gbnf(big), byte_vocab());
    ADD_FAILURE() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-grammar-bytes"), std::string::npos) << e.what();
  }
  // Below the limit the same shape compiles (the rule lookups and the fixpoints are
  // linear: 100,000 rules took 21 s when they were quadratic) and accepts what it should.
  std::string fits = big.substr(0, big.find("r30000 ::=")) + "r30000 ::= \"x\"\n";
  ASSERT_LT(fits.size(), GrammarCacheOptions{}.max_spec_bytes);
  auto g = compile_grammar(GrammarSpec::gbnf(fits), byte_vocab());
  Matcher m(g);
  EXPECT_TRUE(m.accept_bytes("tok0tok1tok2end"));
  EXPECT_TRUE(m.can_end());
  // A chain of 100,000 left calls: an error (too ambiguous), not a stack overflow.
  std::string left = "root ::= r0\n";
  for (int i = 0; i < 100000; ++i) left += fmt::format("r{} ::= r{} \"a\" | \"b\"\n", i, i + 1);
  left += "r100000 ::= \"x\"\n";
  GrammarCacheOptions roomy;
  roomy.max_spec_bytes = left.size() + 100;
  EXPECT_THROW(compile_grammar(GrammarSpec::gbnf(left), byte_vocab(), roomy), GrammarError);
  GrammarCacheOptions few;
  few.program.max_insts = 1000;
  try {
    compile_grammar(GrammarSpec::regex("(ab|cd){5000}"), byte_vocab(), few);
    ADD_FAILURE() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-grammar-insts"), std::string::npos) << e.what();
  }
}

TEST(GrammarLimits, AmbiguityAndMemoryAreBounded) {
  GrammarCacheOptions options;
  options.grammar.automaton.max_threads = 2;
  // Three alternatives alive after "x": past the limit, a GrammarError, not a wrong mask
  // (here at compile time already: the start state's mask looks a token ahead).
  EXPECT_THROW(
      {
        auto g = compile_grammar(GrammarSpec::gbnf("root ::= \"x\" (\"ab\" | \"ac\" | \"ad\")\n"),
                                 byte_vocab(), options);
        Matcher m(g);
        m.accept_bytes("x");
      },
      GrammarError);
  GrammarCacheOptions tiny;
  tiny.grammar.automaton.max_bytes = 64 << 10;
  EXPECT_THROW(
      {
        auto big = compile_grammar(GrammarSpec::regex("[a-z]{1,4000}"), byte_vocab(), tiny);
        Matcher r(big);
        r.accept_bytes(std::string(3000, 'q'));
      },
      GrammarError);
  ProgramLimits few;
  few.max_insts = 1000;
  EXPECT_THROW(compile_program(GrammarSpec::regex("(ab|cd){5000}"), few), GrammarError);
}

// Rows of one grammar on several threads: every mask equals the one-token-at-a-time
// reference, however the threads interleave on the shared automaton and cache.
TEST(GrammarThreads, SharedGrammarServesConcurrentRows) {
  auto g =
      compiled(schema_spec(R"({"type":"object","properties":{"id":{"type":"integer","minimum":0,
      "maximum":99999},"tags":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":4}},
      "required":["id","tags"]})"));
  std::vector<std::thread> threads;
  std::vector<int> num_bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int w = 0; w < 20; ++w) {
        random_walk(Matcher(g), rng, 60, 0.3,
                    [&](const std::vector<uint32_t>& words, const Matcher& m) {
                      if (words != brute_force_mask(m)) ++num_bad[t];
                    });
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(num_bad, std::vector<int>(4, 0));
}

}  // namespace grammar_cache_test
}  // namespace tandem::grammar::test
