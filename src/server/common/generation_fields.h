// Request fields that every generation API reads alike, whichever API's parser reads them
// (openai/chat_request, openai/completion_request, openai/responses_request,
// anthropic/messages_request).
#pragma once

#include "server/common/json_text.h"
#include "server/common/request_fields.h"

namespace tandem::server {

// Template variables from chat_template_kwargs (and a top-level enable_thinking).
Json read_template_kwargs(const FieldReader& fields);

}  // namespace tandem::server
