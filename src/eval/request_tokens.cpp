#include "eval/request_tokens.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem::eval {

RequestTokens request_tokens(const Tokenizer& tokenizer, std::string_view context,
                             std::string_view continuation) {
  size_t end = context.find_last_not_of(" \t\n\r\f\v");
  size_t kept = end == std::string_view::npos ? 0 : end + 1;
  std::string whole_text = std::string(context) + std::string(continuation);
  std::vector<int32_t> whole = tokenizer.encode(whole_text, true);
  std::vector<int32_t> own = tokenizer.encode(context.substr(0, kept), true);
  size_t shared =
      size_t(std::mismatch(own.begin(), own.end(), whole.begin(), whole.end()).first - own.begin());
  if (shared == 0) fail("the context '{}' has no tokens to condition on", context);
  if (shared == whole.size())
    fail("the continuation '{}' adds no tokens to its context", continuation);
  RequestTokens r;
  r.context.assign(whole.begin(), whole.begin() + std::ptrdiff_t(shared));
  r.continuation.assign(whole.begin() + std::ptrdiff_t(shared), whole.end());
  return r;
}

}  // namespace tandem::eval
