// A message's `content` as every API sends it: a string, or a list of typed parts. The one
// place the three conversation readers (openai/chat_messages.h for chat and Responses input,
// anthropic/anthropic_messages.h) read content, so a new kind of part is added here once.
//
// What the chat template sees: text-only content as one string (its text parts joined with
// "\n", as vLLM joins them); content holding an image as a list of {"type": "text", "text"}
// and {"type": "image"} items in their order, as transformers' processors pass it (the
// template writes its image marker for each image item). The images' sources go, in
// order, to a list beside the messages (image_parts.h): the prompt's images are read from it.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/common/image_parts.h"
#include "server/common/json_text.h"

namespace tandem::server {

using ImagePartReader = ImagePart (*)(const Json& part, const std::string& path);

// The part types one API's content may hold, in one role.
struct ContentKinds {
  std::vector<const char*> text_types;   // "text", "input_text", ...
  const char* image_type = nullptr;      // the API's image part: "image_url", ...
  ImagePartReader read_image = nullptr;  // null: images are refused here
};

// Builds one message's content in the template's shape (see the header comment).
class ContentBuilder {
 public:
  void add_text(std::string text);
  void add_image();
  bool has_image() const { return has_image_; }
  bool empty() const { return items_.empty(); }
  Json content() const;  // a string, or the item list when there is an image

 private:
  Json items_ = Json::array();
  bool has_image_ = false;
};

// Text of a content value: a string, or a list of text parts joined with "\n" (as vLLM
// joins them). `path` names the field in errors; `text_types` are the accepted part types
// ("text", "input_text", ...); any other part is a 400 naming it.
std::string content_text(const Json& content, const std::string& path,
                         std::initializer_list<const char*> text_types);

// A content value in the template's shape, its images appended to `images`. Other part
// types, and image parts where `kinds` takes none (a 400 saying where images go), are 400s.
Json read_content(const Json& content, const std::string& path, const ContentKinds& kinds,
                  std::vector<ImagePart>& images);

// Where images are refused: a 400 naming the part.
[[noreturn]] void refuse_image_here(const std::string& type_field, const std::string& type);

}  // namespace tandem::server
