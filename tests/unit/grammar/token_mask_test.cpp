// Token masks against the brute-force reference (each token tried on its own), on a small
// vocabulary sampled from Qwen3 and on the whole of it, in random states of several
// grammars; and the EOS / special-token rules.
#include "grammar_test_support.h"
#include "vocab_fixtures.h"
#include "walk_support.h"

namespace tandem::grammar::test {
namespace token_mask_test {

std::vector<GrammarSpec> specs() {
  return {
      schema_spec(R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},
          "age":{"type":"integer","minimum":0,"maximum":130},"tags":{"type":"array",
          "items":{"enum":["a","bb","ccc"]},"maxItems":3},"ok":{"type":"boolean"}},
          "required":["name","age"]})"),
      GrammarSpec::json_object(),
      schema_spec(R"({"type":"number","minimum":-1.5,"maximum":20})"),
      schema_spec(R"({"type":"string","format":"date-time"})"),
      GrammarSpec::regex("(ab|[0-9]{2,4}|\\w+ )+[.!?]"),
      GrammarSpec::choice({"positive", "negative", "neutral", "pos"}),
      GrammarSpec::gbnf("root ::= \"[\" (item (\", \" item)*)? \"]\"\nitem ::= [a-z]+ | root\n"),
      // Long repetitions, nested: states far from their end share masks (canonical()).
      schema_spec(R"({"type":"object","properties":{"note":{"type":"string","maxLength":300},
          "codes":{"type":"array","items":{"type":"string","minLength":20,"maxLength":90},
          "minItems":17,"maxItems":60}},"required":["note","codes"]})"),
      GrammarSpec::regex("([a-c ]{0,200}x){2,40}y"),
      // More than eight properties: the member tails are rules.
      schema_spec(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
          "c":{"type":"boolean"},"d":{"type":"null"},"e":{"type":"integer"},"f":{"type":"string"},
          "g":{"enum":[1,2]},"h":{"type":"integer"},"i":{"type":"string"},"j":{"type":"boolean"}},
          "required":["e"],"additionalProperties":{"type":"integer"}})"),
  };
}

void expect_masks_exact(std::shared_ptr<const TokenVocab> vocab, size_t num_walks,
                        size_t max_steps) {
  std::mt19937 rng(1234);
  for (const GrammarSpec& spec : specs()) {
    SCOPED_TRACE(spec.key());
    auto g = compile_grammar(spec, vocab);
    size_t num_checked = 0;
    for (size_t w = 0; w < num_walks; ++w) {
      random_walk(Matcher(g), rng, max_steps, 0.2,
                  [&](const std::vector<uint32_t>& words, const Matcher& m) {
                    ASSERT_EQ(words, brute_force_mask(m)) << "state " << m.state();
                    ++num_checked;
                  });
    }
    EXPECT_GE(num_checked, num_walks);
  }
}

TEST(TokenMask, SmallVocabularyMatchesBruteForce) {
  if (!qwen3_vocab()) return;
  expect_masks_exact(small_vocab(4000, 5), 6, 60);
}

TEST(TokenMask, QwenVocabularyMatchesBruteForce) {
  if (!qwen3_vocab()) return;
  expect_masks_exact(qwen3_vocab(), 1, 8);
}

// Every position of a long maxLength string, near its end too, against the reference; and
// the positions far from the end share one mask.
TEST(TokenMask, LongStringPositionsShareExactMasks) {
  if (!qwen3_vocab()) return;
  auto vocab = small_vocab(4000, 11);
  auto g = compile_grammar(schema_spec(R"({"type":"string","maxLength":300})"), vocab);
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("\""));
  std::vector<uint32_t> words(vocab->num_mask_words());
  for (int pos = 0; pos <= 300; ++pos) {
    m.fill_mask(words);
    ASSERT_EQ(words, brute_force_mask(m)) << "after " << pos << " characters";
    if (pos == 300) break;
    ASSERT_TRUE(m.accept_bytes(pos % 7 ? "a" : "\u00e9"));
  }
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("\""));
  // About one mask per position within a trie depth of the end, not one per position.
  EXPECT_LT(g->stats().masks.misses, 60u + vocab->trie_depth());
}

TEST(TokenMask, CachedMasksEqualFreshOnes) {
  if (!qwen3_vocab()) return;
  std::mt19937 rng(99);
  for (const GrammarSpec& spec : specs()) {
    SCOPED_TRACE(spec.key());
    auto shared = compile_grammar(spec, qwen3_vocab());
    for (int w = 0; w < 3; ++w) {
      // Walk on the shared grammar (its masks cached by earlier walks) while a grammar
      // compiled afresh follows the same tokens and computes every mask anew.
      Matcher m(shared), fresh(compile_grammar(spec, qwen3_vocab()));
      std::vector<uint32_t> cached(qwen3_vocab()->num_mask_words()), computed(cached.size());
      for (int step = 0; step < 30 && !m.is_finished(); ++step) {
        m.fill_mask(cached);
        fresh.fill_mask(computed);
        ASSERT_EQ(cached, computed) << "step " << step;
        std::vector<int32_t> ids = allowed_ids(cached);
        ASSERT_FALSE(ids.empty());
        int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        ASSERT_TRUE(m.accept_token(id));
        ASSERT_TRUE(fresh.accept_token(id));
      }
    }
    EXPECT_GT(shared->stats().masks.hits, 0u);
  }
}

TEST(TokenMask, EosOnlyWhenCompleteSpecialNever) {
  if (!qwen3_vocab()) return;
  auto vocab = qwen3_vocab();
  auto g = compile_grammar(
      schema_spec(R"({"type":"object","properties":{"a":{"const":1}},"required":["a"]})"), vocab);
  Matcher m(g);
  std::vector<uint32_t> words(vocab->num_mask_words());
  auto allowed = [&](int32_t id) { return (words[size_t(id) >> 5] >> (id & 31)) & 1u; };
  int32_t im_end = vocab->eos_ids().front();
  m.fill_mask(words);
  EXPECT_FALSE(allowed(im_end));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_bytes("{\"a\":1"));
  m.fill_mask(words);
  EXPECT_FALSE(allowed(im_end));
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.must_end());
  m.fill_mask(words);
  std::vector<int32_t> ids = allowed_ids(words);
  EXPECT_EQ(ids, vocab->eos_ids());
  for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
    if (vocab->is_special(id) && !vocab->is_eos(id)) {
      ASSERT_FALSE(m.accept_token(id)) << id;
    }
  }
  EXPECT_FALSE(m.accept_token(151935));  // padding past the tokenizer
  EXPECT_TRUE(m.accept_token(im_end));
  EXPECT_TRUE(m.is_finished());
  m.fill_mask(words);
  EXPECT_TRUE(allowed_ids(words).empty());
}

TEST(TokenMask, TokensSpanningStructure) {
  if (!qwen3_vocab()) return;
  auto vocab = qwen3_vocab();
  auto g = compile_grammar(
      schema_spec(R"({"type":"object","properties":{"key":{"type":"string"}},"required":["key"]})"),
      vocab);
  Matcher m(g);
  std::vector<uint32_t> words(vocab->num_mask_words());
  m.fill_mask(words);
  // Multi-byte tokens that run across the grammar's pieces are allowed whole.
  for (int32_t id : allowed_ids(words)) {
    std::string b = vocab->bytes(id);
    EXPECT_TRUE(std::string("{\"key\":\"").rfind(b, 0) == 0 || b.rfind("{\"key\":\"", 0) == 0) << b;
  }
  EXPECT_GT(allowed_ids(words).size(), 1u);
}

}  // namespace token_mask_test
}  // namespace tandem::grammar::test
