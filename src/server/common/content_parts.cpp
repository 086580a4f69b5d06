#include "server/common/content_parts.h"

#include <algorithm>
#include <string_view>

#include "server/common/api_error.h"
#include "server/common/request_fields.h"

namespace tandem::server {
namespace {

bool is_one_of(std::string_view s, const std::vector<const char*>& options) {
  return std::any_of(options.begin(), options.end(), [&](const char* o) { return s == o; });
}

[[noreturn]] void refuse_part(const FieldReader& part, const std::string& type) {
  invalid_request(part.name("type"), "'{}' is '{}': only text content is supported",
                  part.name("type"), type);
}

}  // namespace

void ContentBuilder::add_text(std::string text) {
  items_.push_back({{"type", "text"}, {"text", std::move(text)}});
}

void ContentBuilder::add_image() {
  items_.push_back({{"type", "image"}});
  has_image_ = true;
}

Json ContentBuilder::content() const {
  if (has_image_) return items_;
  std::string text;
  for (size_t i = 0; i < items_.size(); ++i) {
    if (i > 0) text += '\n';
    text += items_[i]["text"].get_ref<const std::string&>();
  }
  return text;
}

std::string content_text(const Json& content, const std::string& path,
                         std::initializer_list<const char*> text_types) {
  std::vector<ImagePart> none;
  Json text = read_content(content, path, ContentKinds{text_types, nullptr, nullptr}, none);
  return text.get<std::string>();
}

Json read_content(const Json& content, const std::string& path, const ContentKinds& kinds,
                  std::vector<ImagePart>& images) {
  if (content.is_string()) return content;
  if (!content.is_array())
    invalid_request(path, "'{}' must be a string or a list of content parts, got {}", path,
                    json_type_name(content));
  ContentBuilder out;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_path = item_path(path, i);
    FieldReader part(content[i], part_path);
    std::string type = part.require_string("type");
    if (is_one_of(type, kinds.text_types)) {
      out.add_text(part.require_string("text"));
    } else if (kinds.image_type && type == kinds.image_type) {
      if (!kinds.read_image) refuse_image_here(part.name("type"), type);
      images.push_back(kinds.read_image(content[i], part_path));
      out.add_image();
    } else {
      refuse_part(part, type);
    }
  }
  return out.content();
}

void refuse_image_here(const std::string& type_field, const std::string& type) {
  invalid_request(type_field, "'{}' is '{}': images are only taken in user messages", type_field,
                  type);
}

}  // namespace tandem::server
