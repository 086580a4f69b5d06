#include "server/common/content_parts.h"

#include <algorithm>
#include <string_view>

#include "server/common/api_error.h"
#include "server/common/request_fields.h"

namespace tandem::server {
namespace {

bool is_one_of(std::string_view s, std::initializer_list<const char*> options) {
  return std::any_of(options.begin(), options.end(), [&](const char* o) { return s == o; });
}

}  // namespace

std::string content_text(const Json& content, const std::string& path,
                         std::initializer_list<const char*> text_types) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    invalid_request(path, "'{}' must be a string or a list of content parts, got {}", path,
                    json_type_name(content));
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    FieldReader part(content[i], item_path(path, i));
    std::string type = part.require_string("type");
    if (!is_one_of(type, text_types))
      invalid_request(part.name("type"), "'{}' is '{}': only text content is supported",
                      part.name("type"), type);
    if (i > 0) text += '\n';
    text += part.require_string("text");
  }
  return text;
}

}  // namespace tandem::server
