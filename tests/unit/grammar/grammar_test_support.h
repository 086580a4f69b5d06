// Shared helpers for the grammar tests: a vocabulary of the 256 single bytes (so any text
// can be fed), compiled grammars cached by spec key, and whole-string verdicts.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"

namespace tandem::grammar::test {

using Json = nlohmann::ordered_json;

// Ids 0..255 are the bytes; 256 is EOS; 257 is a special token.
inline std::shared_ptr<const TokenVocab> byte_vocab() {
  static std::shared_ptr<const TokenVocab> vocab = [] {
    TokenVocabParams p;
    for (int b = 0; b < 256; ++b) p.token_bytes.push_back(std::string(1, char(b)));
    p.token_bytes.push_back("");
    p.token_bytes.push_back("<|special|>");
    p.is_special.assign(258, 0);
    p.is_special[256] = p.is_special[257] = 1;
    p.eos_ids = {256};
    return std::make_shared<const TokenVocab>(std::move(p));
  }();
  return vocab;
}

inline std::shared_ptr<CompiledGrammar> compiled(const GrammarSpec& spec) {
  static GrammarCache cache(byte_vocab());
  return cache.get(spec);
}

// Whether the whole of text is an output of spec.
inline bool accepts(const GrammarSpec& spec, std::string_view text) {
  Matcher m(compiled(spec));
  return m.accept_bytes(text) && m.can_end();
}

// Whether text can be continued into an output of spec.
inline bool accepts_prefix(const GrammarSpec& spec, std::string_view text) {
  Matcher m(compiled(spec));
  return m.accept_bytes(text);
}

inline std::filesystem::path cases_dir() {
  return std::filesystem::path(TANDEM_TEST_DATA).parent_path() / "unit" / "grammar" / "cases";
}

inline GrammarSpec schema_spec(std::string_view schema_text, JsonOptions options = {}) {
  return GrammarSpec::json_schema(Json::parse(schema_text), options);
}

}  // namespace tandem::grammar::test
