// A message's `content` as every API sends it: a string, or a list of typed parts. The one
// place the three conversation readers (openai/chat_messages.h for chat and Responses input,
// anthropic/anthropic_messages.h) read content, so a new kind of part is added here once.
#pragma once

#include <initializer_list>
#include <string>

#include "server/common/json_text.h"

namespace tandem::server {

// Text of a content value: a string, or a list of text parts joined with "\n" (as vLLM
// joins them). `path` names the field in errors; `text_types` are the accepted part types
// ("text", "input_text", ...); any other part is a 400 naming it.
std::string content_text(const Json& content, const std::string& path,
                         std::initializer_list<const char*> text_types);

}  // namespace tandem::server
