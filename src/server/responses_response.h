// OpenAI Responses API output: the "response" object with one assistant message item,
// and the streamed events response.created, response.in_progress,
// response.output_item.added, response.content_part.added, response.output_text.delta*,
// response.output_text.done, response.content_part.done, response.output_item.done,
// response.completed (each with its sequence_number).
#pragma once

#include "server/generation_run.h"
#include "server/stream_encoder.h"

namespace tandem::server {

struct ResponsesFormat {
  int input_tokens = 0;
  Json echo = Json::object();  // instructions, max_output_tokens, temperature, top_p, metadata
  std::string item_id;         // "msg_…", the output message's id
};

Json format_response(const ResponseMeta& meta, const ResponsesFormat& format,
                     const ChoiceResult& result);

class ResponsesStreamEncoder : public StreamEncoder {
 public:
  ResponsesStreamEncoder(ResponseMeta meta, ResponsesFormat format);
  std::string begin() override;
  std::string chunk(int choice, const StreamChunk& chunk) override;
  std::string end() override;
  std::string error(const std::string& message) override;

 private:
  std::string event(const char* type, Json fields);

  ResponseMeta meta_;
  ResponsesFormat format_;
  int sequence_ = 0;
  ChoiceResult result_;
};

}  // namespace tandem::server
