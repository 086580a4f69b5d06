#include "server/common/generation_fields.h"

namespace tandem::server {

Json read_template_kwargs(const FieldReader& f) {
  Json kwargs = Json::object();
  if (auto thinking = f.boolean("enable_thinking")) kwargs["enable_thinking"] = *thinking;
  if (const Json* extra = f.object_field("chat_template_kwargs"))
    for (auto it = extra->begin(); it != extra->end(); ++it) kwargs[it.key()] = it.value();
  return kwargs;
}

}  // namespace tandem::server
