// content_hash: the key of an image's encoder-cache entry and what the prefix cache mixes
// into the KV blocks its tokens fall in (ImageInput::content_hash).
//
// It hashes what the encoder will see, not the file: width, height and the RGB pixels after
// EXIF orientation and RGB conversion, before resizing. So the same picture sent as PNG or as
// lossless WebP, or with different metadata, hits the same entry; a re-encoded JPEG (other
// pixels) does not.
//
// The function is SipHash-2-4 (64-bit output) under a 128-bit key drawn at random once per
// process. A keyed PRF, not a plain checksum, because clients choose the pixels: with a
// public, unkeyed 64-bit hash a client could craft an image colliding with another user's
// and be served that user's cached prefix. The key makes hashes differ between processes,
// which is fine for in-memory caches (and tests use the explicit-key overload).
#pragma once

#include <array>
#include <cstdint>

#include "media/rgb_image.h"

namespace tandem {

using SipKey = std::array<uint64_t, 2>;

// Under this process's random key.
uint64_t content_hash(const RgbImage& image);

// Under an explicit key: SipHash-2-4 of [u64 width LE][u64 height LE][pixels].
uint64_t content_hash(const RgbImage& image, const SipKey& key);

// SipHash-2-4 of `size` bytes (exposed for its reference-vector test).
uint64_t siphash24(const SipKey& key, const uint8_t* data, size_t size);

}  // namespace tandem
