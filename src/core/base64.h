// Base64 (RFC 4648 §4, the standard alphabet): the payload of `data:` URLs and of
// Anthropic's base64 image sources, and what `tandem bench` encodes its images with.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::base64 {

// With '=' padding to a multiple of 4 characters.
std::string encode(std::span<const uint8_t> bytes);

// The decoded size of `text` (for a bound checked before anything is allocated); exact for
// valid input.
size_t decoded_size(std::string_view text);

// Strict decoding, as Python's b64decode(validate=True) but forgiving missing padding:
// only the alphabet, '=' only at the end (at most two, completing the last group), no
// whitespace. nullopt with `error` set to what is wrong and where, otherwise.
std::optional<std::vector<uint8_t>> decode(std::string_view text, std::string* error = nullptr);

}  // namespace tandem::base64
