// OpenAI chat completion responses: the whole object ("chat.completion") and the
// streamed chunks ("chat.completion.chunk"), with the reasoning apart from the content
// (message.reasoning_content and vLLM's newer `reasoning`, streamed as delta fields of
// the same names before the content's), tool calls parsed out of the content, logprobs in
// the chat shape, finish_reason and usage.
#pragma once

#include <memory>
#include <vector>

#include "server/common/answer_split.h"
#include "server/common/generation_run.h"
#include "server/common/logprobs_format.h"
#include "server/common/stream_encoder.h"
#include "server/common/tool_calls.h"
#include "server/openai/openai_format.h"

namespace tandem::server {

struct ChatFormat {
  int top_logprobs = -1;  // -1: no logprobs
  bool parse_tool_calls = false;
  TokenText token_text;   // needed when logprobs are on
  int prompt_tokens = 0;  // counted once, however many choices
  ReasoningSplit reasoning;  // off: no reasoning fields
  // vLLM's return_token_ids: the prompt's ids at the top level (of the whole response, or
  // of the first streamed chunk) and each choice's generated ids (EOS included).
  bool return_token_ids = false;
  std::vector<int32_t> prompt_ids;
};

Json format_chat_completion(const ResponseMeta& meta, const ChatFormat& format,
                            const std::vector<ChoiceResult>& results);

class ChatStreamEncoder : public StreamEncoder {
 public:
  ChatStreamEncoder(ResponseMeta meta, ChatFormat format, int num_choices, bool include_usage);
  std::string begin() override;
  std::string chunk(int choice, const StreamChunk& chunk) override;
  std::string end() override;
  std::string error(const std::string& message) override;

 private:
  struct ChoiceState {
    AnswerStream answer;
    int num_calls = 0;
    int num_tokens = 0;
  };
  Json chunk_json(int choice, Json delta, Json logprobs, Json finish_reason) const;
  std::string deltas(int choice, const AnswerParts& parts, Json logprobs, Json token_ids);

  ResponseMeta meta_;
  ChatFormat format_;
  bool include_usage_;
  std::vector<ChoiceState> choices_;
  int completion_tokens_ = 0;
  int cached_tokens_ = 0;  // the most any choice found (they share one prompt)
};

}  // namespace tandem::server
