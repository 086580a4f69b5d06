// The image parts of a request's messages, as each API spells them, read into one
// ImagePart: where the bytes come from (a data: URL's base64, an http(s) URL, a file: URL)
// and which message part it was, for errors. Nothing is decoded or fetched here (that is
// request_images.h, once the model is known to take images): this is parsing only.
//
//   OpenAI chat   {"type": "image_url", "image_url": {"url": URL, "detail"?}}  (or a bare
//                 URL string as "image_url", which vLLM also takes)
//   Responses     {"type": "input_image", "image_url": URL, "detail"?}
//   Anthropic     {"type": "image", "source": {"type": "base64", "media_type", "data"}}
//                 or {"type": "image", "source": {"type": "url", "url": URL}}
// URL: "data:image/png;base64,...", "http(s)://...", or "file:///path".
#pragma once

#include <string>
#include <string_view>

#include "server/common/json_text.h"

namespace tandem::server {

enum class ImageSource : uint8_t {
  kData,  // base64 in the request itself
  kHttp,  // http:// or https://, fetched if --allowed-media-domains allows its host
  kFile,  // file://, read if under --allowed-local-media-path
};

struct ImagePart {
  std::string path;  // the part, as errors name it: "messages[1].content[2]"
  ImageSource source = ImageSource::kData;
  std::string media_type;  // kData: as declared ("image/png"; "" when none); else ""
  std::string payload;     // kData: the base64 text; kHttp / kFile: the whole URL
};

// The media types an image may declare (a data: URL's, Anthropic's media_type): PNG, JPEG,
// WebP, GIF. What the bytes are is decided from the bytes themselves, as PIL does.
bool is_supported_image_type(std::string_view media_type);

// A URL as an ImagePart; a 400 naming `field` for a malformed data: URL, one that is not
// base64, a media type that is not an image tandem decodes, or another scheme.
ImagePart image_part_from_url(std::string_view url, const std::string& path,
                              const std::string& field);

// A 400 about one image part: "messages[1].content[2]: <why>", naming the part as param.
[[noreturn]] void image_part_error(const std::string& path, const std::string& why);

// One API's image part (`part` is the whole content part, `path` its place).
ImagePart read_openai_image_part(const Json& part, const std::string& path);
ImagePart read_responses_image_part(const Json& part, const std::string& path);
ImagePart read_anthropic_image_block(const Json& block, const std::string& path);

}  // namespace tandem::server
