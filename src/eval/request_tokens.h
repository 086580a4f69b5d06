// Where a continuation's tokens begin. Tokenizing context and continuation apart would
// score tokens the model never sees together (BPE merges across the boundary), so, as
// lm-evaluation-harness does, the context's trailing whitespace moves to the front of the
// continuation and context + continuation is encoded whole. The continuation is every
// token past the longest common prefix of that encoding and the context's own: the same
// as the harness's "past the context's length" whenever the context's tokens are a prefix
// of the whole (a boundary at a space), and where a token straddles the boundary (a split
// inside a word) that token is scored with the continuation, so every byte of the
// continuation is covered by scored tokens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tandem {
class Tokenizer;
}

namespace tandem::eval {

struct RequestTokens {
  std::vector<int32_t> context;       // never empty
  std::vector<int32_t> continuation;  // never empty
};

// Both encodings add the tokenizer's special tokens (a BOS where it has one), as a server
// does for a text prompt. Throws tandem::Error when either side comes out empty.
RequestTokens request_tokens(const Tokenizer& tokenizer, std::string_view context,
                             std::string_view continuation);

}  // namespace tandem::eval
