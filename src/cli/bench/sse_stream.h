// Reading an OpenAI /v1/completions (or chat completions) stream as it arrives: SSE framing over
// bytes that come in arbitrary pieces, and what each `data:` payload says (a token arrival, the
// usage chunk, an error, the [DONE] sentinel).
#pragma once

#include <functional>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::cli::bench {

// Incremental SSE parser (the subset servers send: `data:` lines, `event:`/`id:`/comment
// lines ignored, blank line ends an event). A frame split across feed() calls, or "\r\n"
// line endings, parse the same as one whole "\n" frame.
class SseParser {
 public:
  using OnData = std::function<void(std::string_view data)>;
  explicit SseParser(OnData on_data) : on_data_(std::move(on_data)) {}

  void feed(std::string_view bytes);
  // Bytes after the last complete line (a stream cut mid-line leaves some).
  size_t num_pending_bytes() const { return line_.size(); }

 private:
  void take_line(std::string_view line);

  OnData on_data_;
  std::string line_;  // the current line, not yet terminated
  std::string data_;  // data lines of the current event, joined by '\n'
  bool has_data_ = false;
};

// What one completion stream has said so far.
struct StreamTally {
  int num_content_chunks = 0;                  // chunks that carried generated text/tokens
  std::optional<int> usage_completion_tokens;  // from the usage chunk, when sent
  std::optional<int> usage_prompt_tokens;
  std::optional<int> usage_cached_tokens;  // usage.prompt_tokens_details.cached_tokens
  std::vector<int32_t> token_ids;          // generated ids, when the server streams them
  std::string finish_reason;         // of the first choice, once sent
  std::optional<std::string> error;  // an error payload or a malformed chunk
  bool done = false;                 // `data: [DONE]` seen
};

// Folds one `data:` payload into `tally`. Returns true when the payload carried generated
// content (non-empty text or token ids): one token arrival for TTFT/ITL.
bool tally_completion_event(std::string_view data, StreamTally& tally);

}  // namespace tandem::cli::bench
