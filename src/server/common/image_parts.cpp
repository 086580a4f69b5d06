#include "server/common/image_parts.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "core/ascii.h"
#include "server/common/api_error.h"
#include "server/common/request_fields.h"

namespace tandem::server {
namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && ascii_lower(s.substr(0, prefix.size())) == prefix;
}

// A URL for a message: its scheme and a bounded head, never a whole data: payload.
std::string url_head(std::string_view url) {
  constexpr size_t kShown = 48;
  return url.size() <= kShown ? std::string(url) : std::string(url.substr(0, kShown)) + "...";
}

// "data:[<media type>][;param]*[;base64],<data>" (RFC 2397).
ImagePart data_url_part(std::string_view url, const std::string& path, const std::string& field) {
  size_t comma = url.find(',');
  if (comma == std::string_view::npos)
    invalid_request(field, "'{}' is not a valid data: URL (no ',' before the data)", field);
  std::string header = ascii_lower(url.substr(5, comma - 5));  // after "data:"
  bool base64 = header.size() >= 7 && header.compare(header.size() - 7, 7, ";base64") == 0;
  if (!base64)
    invalid_request(field,
                    "'{}' must be base64-encoded: data:<media type>;base64,<data> (got '{}')",
                    field, url_head(url.substr(0, comma + 1)));
  std::string media_type = header.substr(0, header.find(';'));
  if (!media_type.empty() && !is_supported_image_type(media_type))
    invalid_request(field,
                    "'{}' has media type '{}': images must be image/png, image/jpeg, "
                    "image/webp or image/gif",
                    field, media_type);
  ImagePart part;
  part.path = path;
  part.source = ImageSource::kData;
  part.media_type = media_type;
  part.payload = std::string(url.substr(comma + 1));
  return part;
}

void check_detail(const FieldReader& f) {
  auto detail = f.string("detail");
  if (detail && *detail != "auto" && *detail != "low" && *detail != "high")
    invalid_request(f.name("detail"), "'{}' must be auto, low or high; got '{}'", f.name("detail"),
                    *detail);
}

}  // namespace

bool is_supported_image_type(std::string_view media_type) {
  std::string t = ascii_lower(media_type);
  return t == "image/png" || t == "image/jpeg" || t == "image/jpg" || t == "image/webp" ||
         t == "image/gif";
}

ImagePart image_part_from_url(std::string_view url, const std::string& path,
                              const std::string& field) {
  if (starts_with_ci(url, "data:")) return data_url_part(url, path, field);
  ImagePart part;
  part.path = path;
  part.payload = std::string(url);
  if (starts_with_ci(url, "http://") || starts_with_ci(url, "https://")) {
    part.source = ImageSource::kHttp;
  } else if (starts_with_ci(url, "file:")) {
    part.source = ImageSource::kFile;
  } else {
    invalid_request(field,
                    "'{}' must be a data: URL (data:image/png;base64,...), an http(s) URL or a "
                    "file: URL; got '{}'",
                    field, url_head(url));
  }
  return part;
}

void image_part_error(const std::string& path, const std::string& why) {
  throw ApiError(400, "invalid_request_error", fmt::format("{}: {}", path, why), path,
                 "invalid_image");
}

ImagePart read_openai_image_part(const Json& part, const std::string& path) {
  FieldReader f(part, path);
  const Json& image_url = f.require("image_url");
  if (image_url.is_string())
    return image_part_from_url(image_url.get_ref<const std::string&>(), path, f.name("image_url"));
  FieldReader u(image_url, f.name("image_url"));
  check_detail(u);
  return image_part_from_url(u.require_string("url"), path, u.name("url"));
}

ImagePart read_responses_image_part(const Json& part, const std::string& path) {
  FieldReader f(part, path);
  check_detail(f);
  if (!f.has("image_url")) {
    if (f.has("file_id"))
      invalid_request(f.name("file_id"),
                      "'{}' is not supported (files are not stored): send the image as "
                      "'image_url', a data: URL",
                      f.name("file_id"));
    invalid_request(f.name("image_url"), "'{}' is a required field", f.name("image_url"));
  }
  return image_part_from_url(f.require_string("image_url"), path, f.name("image_url"));
}

ImagePart read_anthropic_image_block(const Json& block, const std::string& path) {
  FieldReader f(block, path);
  FieldReader source(f.require("source"), f.name("source"));
  std::string type = source.require_string("type");
  if (type == "url")
    return image_part_from_url(source.require_string("url"), path, source.name("url"));
  if (type != "base64")
    invalid_request(source.name("type"), "'{}' must be 'base64' or 'url', got '{}'",
                    source.name("type"), type);
  std::string media_type = source.require_string("media_type");
  if (!is_supported_image_type(media_type))
    invalid_request(source.name("media_type"),
                    "'{}' is '{}': images must be image/jpeg, image/png, image/gif or image/webp",
                    source.name("media_type"), media_type);
  ImagePart part;
  part.path = path;
  part.source = ImageSource::kData;
  part.media_type = ascii_lower(media_type);
  part.payload = source.require_string("data");
  return part;
}

}  // namespace tandem::server
