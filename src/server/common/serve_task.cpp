#include "server/common/serve_task.h"

#include "server/common/api_error.h"
#include "server/endpoints.h"

namespace tandem::server {

const char* serve_task_name(ServeTask t) {
  switch (t) {
    case ServeTask::Auto:
      return "auto";
    case ServeTask::Generate:
      return "generate";
    case ServeTask::Embed:
      return "embed";
  }
  return "auto";
}

std::optional<ServeTask> serve_task_from_name(std::string_view name) {
  for (ServeTask t : {ServeTask::Auto, ServeTask::Generate, ServeTask::Embed})
    if (name == serve_task_name(t)) return t;
  return std::nullopt;
}

void handle_generation_not_served(const EndpointContext&, const httplib::Request& req,
                                  httplib::Response&) {
  throw not_found_error(
      fmt::format("{} is not served: this server runs --task embed (an embedding model); use "
                  "/v1/embeddings, or serve a generative model with --task auto",
                  req.path));
}

void handle_embeddings_not_served(const EndpointContext&, const httplib::Request& req,
                                  httplib::Response&) {
  throw not_found_error(fmt::format(
      "{} is not served: this server runs --task generate; start it with --task auto (the "
      "default) or --task embed to serve embeddings",
      req.path));
}

}  // namespace tandem::server
