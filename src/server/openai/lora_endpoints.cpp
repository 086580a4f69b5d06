// POST /v1/load_lora_adapter {"lora_name", "lora_path"} and /v1/unload_lora_adapter
// {"lora_name"}, vLLM's runtime LoRA updates (routed only with
// --enable-lora-runtime-updates). As vLLM: 200 with a plain-text "Success: ..." line;
// failures in the OpenAI error shape. The statuses: 400 for what the request got wrong
// (a name already loaded, a folder that is not an adapter of this model, naming the
// cause), 404 for unloading a name that is not loaded, 409 when the server's state is in
// the way (every slot holds an adapter; an adapter with live requests is not unloaded:
// retry once they have finished), 503 while the server stops.
#include "server/common/api_error.h"
#include "server/common/request_fields.h"
#include "server/endpoints.h"

namespace tandem::server {
namespace {

ApiError load_refused(const LoraLoadError& e) {
  switch (e.why()) {
    case LoraRefusal::NoCapacity:
      return ApiError(400, "invalid_request_error", e.what(), "", "lora_disabled");
    case LoraRefusal::BadName:
    case LoraRefusal::NameTaken:
      return ApiError(400, "invalid_request_error", e.what(), "lora_name");
    case LoraRefusal::NoFreeSlot:
      return ApiError(409, "invalid_request_error", e.what(), "", "lora_slots_full");
    case LoraRefusal::BadAdapter:
      return ApiError(400, "invalid_request_error", e.what(), "lora_path");
    case LoraRefusal::Stopping:
      break;
  }
  return shutting_down_error();
}

void reply_text(httplib::Response& res, const std::string& text) {
  res.status = 200;
  res.set_content(text, "text/plain; charset=utf-8");
}

}  // namespace

void handle_load_lora_adapter(const EndpointContext& ctx, const httplib::Request& req,
                              httplib::Response& res) {
  Json body = parse_request_body(req.body, ctx.limits.json);
  FieldReader f(body);
  const std::string name = f.require_string("lora_name");
  const std::string path = f.require_string("lora_path");
  if (name == ctx.model_name)
    invalid_request("lora_name", "'{}' is the base model's name; pick another for the adapter",
                    name);
  try {
    ctx.model.engine->load_lora(name, path);
  } catch (const LoraLoadError& e) {
    throw load_refused(e);
  }
  reply_text(res, fmt::format("Success: LoRA adapter '{}' added successfully.", name));
}

void handle_unload_lora_adapter(const EndpointContext& ctx, const httplib::Request& req,
                                httplib::Response& res) {
  Json body = parse_request_body(req.body, ctx.limits.json);
  const std::string name = FieldReader(body).require_string("lora_name");
  switch (ctx.model.engine->unload_lora(name)) {
    case LoraRemoval::Removed:
      return reply_text(res, fmt::format("Success: LoRA adapter '{}' removed successfully.", name));
    case LoraRemoval::NotFound:
      throw ApiError(404, "invalid_request_error",
                     fmt::format("The lora adapter '{}' cannot be found.", name), "lora_name",
                     "model_not_found");
    case LoraRemoval::InUse:
      break;
  }
  throw ApiError(409, "invalid_request_error",
                 fmt::format("LoRA adapter '{}' has live requests; it is not unloaded under "
                             "them (retry once they have finished)",
                             name),
                 "lora_name", "lora_in_use");
}

}  // namespace tandem::server
