// MediaError: why an image part of a request cannot be used. Thrown by decoding and
// preprocessing on the HTTP thread; the server turns it into a 400 naming the message part
// (what() is a sentence about the image, without the part's position). A processor config
// that cannot be read is also a MediaError (kind kConfig): a model-folder problem, found
// at load.
#pragma once

#include <string>
#include <utility>

#include "core/error.h"

namespace tandem {

enum class MediaErrorKind {
  kTooLarge,     // over a MediaLimits bound (encoded bytes, decoded pixels, ...)
  kCorrupt,      // truncated or malformed data, per the format's decoder
  kUnsupported,  // not PNG/JPEG/WebP/GIF, or a variant PIL would not open either
  kInvalid,      // decodes, but the processor cannot use it (e.g. an impossible aspect)
  kConfig,       // the model folder's processor files
};

class MediaError : public Error {
 public:
  MediaError(MediaErrorKind kind, std::string message)
      : Error(std::move(message)), kind_(kind) {}
  MediaErrorKind kind() const { return kind_; }

 private:
  MediaErrorKind kind_;
};

// Throws MediaError{kind, fmt::format(format, args...)}.
template <typename... Args>
[[noreturn]] void media_fail(MediaErrorKind kind, fmt::format_string<Args...> format,
                             Args&&... args) {
  throw MediaError(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tandem
