// Anthropic message responses: the whole "message" object, and the streamed event
// sequence message_start, (content_block_start, content_block_delta*,
// content_block_stop)*, message_delta, message_stop — with a thinking block first when
// the model thought (streamed as thinking_delta events, then a signature_delta before its
// content_block_stop, as the API does; tandem signs nothing, so the signature is empty),
// then text blocks and tool_use blocks parsed out of the answer.
#pragma once

#include "server/common/answer_split.h"
#include "server/common/generation_run.h"
#include "server/common/stream_encoder.h"
#include "server/common/tool_calls.h"

namespace tandem::server {

struct AnthropicFormat {
  int input_tokens = 0;
  bool parse_tool_calls = false;
  ReasoningSplit reasoning;
};

// "end_turn", "max_tokens", "stop_sequence" (a stop string matched), "tool_use".
const char* anthropic_stop_reason(FinishReason reason, bool has_tool_use,
                                  const std::string& matched_stop);

Json format_anthropic_message(const ResponseMeta& meta, const AnthropicFormat& format,
                              const ChoiceResult& result);

class AnthropicStreamEncoder : public StreamEncoder {
 public:
  AnthropicStreamEncoder(ResponseMeta meta, AnthropicFormat format);
  std::string begin() override;
  std::string chunk(int choice, const StreamChunk& chunk) override;
  std::string end() override;
  std::string error(const std::string& message) override;

 private:
  std::string thinking_delta(const std::string& text);
  std::string close_thinking_block();
  std::string text_delta(const std::string& text);
  std::string tool_use_block(const ToolCall& call);
  std::string close_text_block();

  ResponseMeta meta_;
  AnthropicFormat format_;
  AnswerStream answer_;
  int next_index_ = 0;          // index of the next content block
  bool thinking_open_ = false;  // a thinking block is started and not stopped
  bool text_open_ = false;      // a text block is started and not stopped
  bool has_text_ = false;       // a text block was started
  int num_tool_uses_ = 0;
  int output_tokens_ = 0;
  int cached_tokens_ = 0;  // known at the end: message_delta's usage carries it
  FinishReason finish_ = FinishReason::Stop;
  std::string matched_stop_;
};

}  // namespace tandem::server
