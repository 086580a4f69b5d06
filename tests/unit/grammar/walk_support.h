// Random walks through a grammar's masks, for the token-level and property tests.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace tandem::grammar::test {

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& words) {
  std::vector<int32_t> ids;
  for (size_t w = 0; w < words.size(); ++w)
    for (uint32_t bits = words[w]; bits; bits &= bits - 1)
      ids.push_back(int32_t(w * 32 + size_t(__builtin_ctz(bits))));
  return ids;
}

// The tokens a matcher takes next, found one token at a time: the reference for masks.
inline std::vector<uint32_t> brute_force_mask(const Matcher& m) {
  const TokenVocab& v = m.grammar().vocab();
  std::vector<uint32_t> words(v.num_mask_words(), 0);
  for (int32_t id = 0; id < v.num_tokens(); ++id) {
    Matcher copy = m;
    if (copy.accept_token(id)) words[size_t(id) >> 5] |= 1u << (id & 31);
  }
  return words;
}

struct Walk {
  std::string text;    // the bytes of the tokens taken, EOS excluded
  bool ended = false;  // EOS taken, or the grammar had to end
  size_t num_steps = 0;
};

// The k-th allowed id (0-based) of a mask, skipping `skip` ids; nullopt past the end.
inline std::optional<int32_t> nth_allowed(const std::vector<uint32_t>& words, size_t k,
                                          const std::vector<int32_t>& skip) {
  for (size_t w = 0; w < words.size(); ++w) {
    uint32_t bits = words[w];
    for (int32_t id : skip)
      if (size_t(id) >> 5 == w) bits &= ~(1u << (id & 31));
    size_t n = size_t(__builtin_popcount(bits));
    if (k >= n) {
      k -= n;
      continue;
    }
    for (; k > 0; --k) bits &= bits - 1;
    return int32_t(w * 32 + size_t(__builtin_ctz(bits)));
  }
  return std::nullopt;
}

// Takes uniformly random allowed tokens until EOS (taken with probability eos_weight when
// allowed and something else is too) or max_steps. Every mask is checked on the way by
// `check` (mask, matcher).
template <typename Check>
Walk random_walk(Matcher m, std::mt19937& rng, size_t max_steps, double eos_weight, Check&& check) {
  const TokenVocab& v = m.grammar().vocab();
  std::vector<uint32_t> words(v.num_mask_words());
  Walk walk;
  for (; walk.num_steps < max_steps; ++walk.num_steps) {
    m.fill_mask(words);
    check(words, m);
    size_t num_allowed = 0;
    for (uint32_t w : words) num_allowed += size_t(__builtin_popcount(w));
    size_t num_eos = 0;
    for (int32_t id : v.eos_ids()) num_eos += (words[size_t(id) >> 5] >> (id & 31)) & 1u;
    EXPECT_EQ(num_eos > 0, m.can_end());
    if (num_allowed == 0) break;
    size_t num_others = num_allowed - num_eos;
    if (num_others == 0 || (num_eos > 0 && std::bernoulli_distribution(eos_weight)(rng))) {
      EXPECT_TRUE(m.accept_token(v.eos_ids().front()));
      walk.ended = true;
      break;
    }
    size_t k = std::uniform_int_distribution<size_t>(0, num_others - 1)(rng);
    int32_t id = *nth_allowed(words, k, v.eos_ids());
    EXPECT_TRUE(m.accept_token(id)) << "a masked-in token was refused: " << id;
    walk.text += v.bytes(id);
  }
  return walk;
}

}  // namespace tandem::grammar::test
