// libFuzzer target: request bytes → parsed body → a validated request of each API, its
// chat prompt rendered (the oracle's ChatML template) and tokenized. The server's own
// contract is the oracle: a bad request may only end in an ApiError (a 4xx); any other
// exception would be a 500, and a crash or sanitizer report is a bug.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "server/anthropic/messages_request.h"
#include "server/common/api_error.h"
#include "server/common/chat_prompt.h"
#include "server/common/request_fields.h"
#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"
#include "server/openai/responses_request.h"

namespace {

using namespace tandem;
using namespace tandem::server;

const ChatPromptBuilder& builder() {
  static std::shared_ptr<const ChatPromptBuilder> b = [] {
    auto tok = Tokenizer::load(fuzz::oracle_dir("llama"));
    return ChatPromptBuilder::create(TokenizerConfig::load(fuzz::oracle_dir("llama")), tok);
  }();
  return *b;
}

jinja::RenderLimits small_limits() {
  TemplateLimits t;
  t.max_iterations = 100000;
  t.max_output_bytes = 1 << 20;
  t.max_memory_bytes = 16 << 20;
  return render_limits(t, nullptr);
}

// Runs one stage; an ApiError is the expected outcome of a bad request.
template <typename Fn>
void expect_only_api_errors(Fn&& fn) {
  try {
    fn();
  } catch (const ApiError&) {
  } catch (const std::exception& e) {
    fuzz::fail("a request ended in a non-API error (a 500)", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  RequestLimits limits;
  GenerationRequest defaults;
  expect_only_api_errors([&] {
    Json body = parse_request_body(text, limits.json);
    expect_only_api_errors([&] {
      ChatCompletionRequest r = parse_chat_request(body, defaults, 512, limits);
      builder().tokens(r.prompt, small_limits());
    });
    expect_only_api_errors([&] { parse_completion_request(body, defaults, 512, limits); });
    expect_only_api_errors([&] {
      MessagesRequest r = parse_messages_request(body, defaults, 512, limits);
      builder().tokens(r.prompt, small_limits());
    });
    expect_only_api_errors([&] { parse_responses_request(body, defaults, 512, limits); });
  });
  return 0;
}
