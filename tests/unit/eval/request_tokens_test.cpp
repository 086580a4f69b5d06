// Where a continuation's tokens begin, on the embedded model's byte-level BPE tokenizer.
#include <gtest/gtest.h>

#include "core/error.h"
#include "eval/request_tokens.h"
#include "tokenizer/tokenizer.h"

namespace tandem::eval {
namespace request_tokens_test {

std::shared_ptr<const Tokenizer> tiny_kjv() {
  static auto tok = Tokenizer::load(std::filesystem::path(TANDEM_TEST_DATA) / ".." / ".." /
                                    "models" / "tiny-kjv");
  return tok;
}

TEST(RequestTokens, ASpaceLedContinuationIsItsOwnTokens) {
  const Tokenizer& tok = *tiny_kjv();
  RequestTokens t = request_tokens(tok, "And God said, Let there be", " light");
  EXPECT_EQ(t.context, tok.encode("And God said, Let there be", true));
  EXPECT_EQ(tok.decode(t.continuation, false), " light");
}

TEST(RequestTokens, TrailingWhitespaceOfTheContextMovesToTheContinuation) {
  const Tokenizer& tok = *tiny_kjv();
  // GPT-2 pre-tokenization glues a space to the word after it: " light" is one piece, so a
  // context ending in a space would leave a lone " " token the model never sees there.
  RequestTokens moved = request_tokens(tok, "Let there be ", "light");
  RequestTokens plain = request_tokens(tok, "Let there be", " light");
  EXPECT_EQ(moved.context, plain.context);
  EXPECT_EQ(moved.continuation, plain.continuation);
  RequestTokens newline = request_tokens(tok, "Genesis 1\n", "In the beginning");
  EXPECT_EQ(newline.context, tok.encode("Genesis 1", true));
  EXPECT_EQ(tok.decode(newline.continuation, false), "\nIn the beginning");
}

TEST(RequestTokens, AStraddlingTokenIsScoredWithTheContinuation) {
  const Tokenizer& tok = *tiny_kjv();
  // Split inside a word: "wick" alone encodes differently from the "wicked" of the whole
  // text, so the context's own tokens are longer than the shared prefix. The shared prefix
  // is the context, and the rest (" wicked man") covers all of the continuation.
  std::vector<int32_t> own = tok.encode("the wickedness of the wick", true);
  std::vector<int32_t> whole = tok.encode("the wickedness of the wicked man", true);
  ASSERT_FALSE(std::equal(own.begin(), own.end(), whole.begin()))
      << "the example no longer straddles";
  RequestTokens t = request_tokens(tok, "the wickedness of the wick", "ed man");
  ASSERT_EQ(t.context.size() + t.continuation.size(), whole.size());
  EXPECT_TRUE(std::equal(t.context.begin(), t.context.end(), whole.begin()));
  EXPECT_TRUE(std::equal(t.continuation.begin(), t.continuation.end(),
                         whole.begin() + std::ptrdiff_t(t.context.size())));
  std::string continuation = tok.decode(t.continuation, false);
  EXPECT_TRUE(continuation.ends_with("ed man")) << continuation;
  EXPECT_GT(continuation.size(), std::string("ed man").size());  // the straddling token's head
  EXPECT_EQ(tok.decode(t.context, false) + continuation, "the wickedness of the wicked man");
}

TEST(RequestTokens, EmptySidesAreErrors) {
  const Tokenizer& tok = *tiny_kjv();
  EXPECT_THROW(request_tokens(tok, "   ", "word"), Error);  // nothing left to condition on
  EXPECT_THROW(request_tokens(tok, "word", ""), Error);
}

}  // namespace request_tokens_test
}  // namespace tandem::eval
