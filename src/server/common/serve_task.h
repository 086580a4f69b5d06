// What a server serves (`tandem serve --task`): the generation routes (/v1/chat/completions,
// /v1/completions, /v1/responses, /v1/messages), the embeddings route (/v1/embeddings), or
// both. A route a task does not serve answers 404 with a message that names the flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem::server {

enum class ServeTask : uint8_t {
  Auto,      // both: any decoder model generates, and pools its hidden states
  Generate,  // no /v1/embeddings
  Embed,     // an embedding model: /v1/embeddings only
};

const char* serve_task_name(ServeTask t);
// "auto", "generate", "embed"; nullopt for anything else.
std::optional<ServeTask> serve_task_from_name(std::string_view name);
inline bool serves_generation(ServeTask t) {
  return t != ServeTask::Embed;
}
inline bool serves_embeddings(ServeTask t) {
  return t != ServeTask::Generate;
}

}  // namespace tandem::server
