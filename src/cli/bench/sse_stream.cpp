#include "cli/bench/sse_stream.h"

#include <nlohmann/json.hpp>

namespace tandem::cli::bench {

void SseParser::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      line_.append(bytes);
      return;
    }
    line_.append(bytes.substr(0, nl));
    bytes.remove_prefix(nl + 1);
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    take_line(line_);
    line_.clear();
  }
}

void SseParser::take_line(std::string_view line) {
  if (line.empty()) {  // end of event
    if (has_data_) on_data_(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.rfind("data:", 0) != 0) return;  // event:, id:, retry:, ": comment"
  std::string_view value = line.substr(5);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

namespace {

using nlohmann::json;

bool non_empty_string(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

// A completions chunk's text, a chat chunk's delta content, or generated ids.
bool has_content(const json& choice) {
  if (non_empty_string(choice, "text")) return true;
  auto delta = choice.find("delta");
  if (delta != choice.end() && delta->is_object() && non_empty_string(*delta, "content"))
    return true;
  auto ids = choice.find("token_ids");
  return ids != choice.end() && ids->is_array() && !ids->empty();
}

void read_usage(const json& usage, StreamTally& tally) {
  if (!usage.is_object()) return;
  if (auto c = usage.find("completion_tokens"); c != usage.end() && c->is_number_integer())
    tally.usage_completion_tokens = c->get<int>();
  if (auto p = usage.find("prompt_tokens"); p != usage.end() && p->is_number_integer())
    tally.usage_prompt_tokens = p->get<int>();
  auto details = usage.find("prompt_tokens_details");
  if (details == usage.end() || !details->is_object()) return;
  if (auto c = details->find("cached_tokens"); c != details->end() && c->is_number_integer())
    tally.usage_cached_tokens = c->get<int>();
}

// vLLM's and tandem's return_token_ids: the chunk's generated ids.
void read_token_ids(const json& choice, StreamTally& tally) {
  auto ids = choice.find("token_ids");
  if (ids == choice.end() || !ids->is_array()) return;
  for (const json& id : *ids)
    if (id.is_number_integer()) tally.token_ids.push_back(id.get<int32_t>());
}

std::string error_message(const json& error) {
  if (error.is_object() && error.contains("message") && error["message"].is_string())
    return error["message"].get<std::string>();
  return error.dump();
}

}  // namespace

bool tally_completion_event(std::string_view data, StreamTally& tally) {
  if (data == "[DONE]") {
    tally.done = true;
    return false;
  }
  json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) {
    tally.error = "malformed stream chunk: " + std::string(data.substr(0, 200));
    return false;
  }
  if (auto e = chunk.find("error"); e != chunk.end()) {
    tally.error = error_message(*e);
    return false;
  }
  if (auto u = chunk.find("usage"); u != chunk.end()) read_usage(*u, tally);
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return false;
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return false;
  if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string())
    tally.finish_reason = f->get<std::string>();
  read_token_ids(choice, tally);
  if (!has_content(choice)) return false;
  tally.num_content_chunks++;
  return true;
}

}  // namespace tandem::cli::bench
