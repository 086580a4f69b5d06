#include "core/base64.h"

#include <array>

#include <fmt/format.h>

namespace tandem::base64 {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for an alphabet character, -1 otherwise.
constexpr std::array<int8_t, 256> make_values() {
  std::array<int8_t, 256> v{};
  for (auto& x : v) x = -1;
  for (int i = 0; i < 64; ++i) v[uint8_t(kAlphabet[i])] = int8_t(i);
  return v;
}
constexpr std::array<int8_t, 256> kValues = make_values();

// `text` without its '=' padding, or nullopt (with `error`) when the padding is malformed.
std::optional<std::string_view> strip_padding(std::string_view text, std::string* error) {
  size_t pads = 0;
  while (pads < text.size() && text[text.size() - 1 - pads] == '=') ++pads;
  std::string_view body = text.substr(0, text.size() - pads);
  // Padding completes the last 4-character group: 2 characters take "==", 3 take "=".
  bool ok = pads == 0 || (pads <= 2 && (body.size() + pads) % 4 == 0 && body.size() % 4 != 1);
  if (!ok) {
    if (error) *error = fmt::format("misplaced '=' padding at offset {}", body.size());
    return std::nullopt;
  }
  return body;
}

}  // namespace

std::string encode(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t n = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8 | bytes[i + 2];
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = uint32_t(bytes[i]) << 16 | (rest == 2 ? uint32_t(bytes[i + 1]) << 8 : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

size_t decoded_size(std::string_view text) {
  size_t n = text.size();
  while (n > 0 && text[n - 1] == '=') --n;
  return n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1);
}

std::optional<std::vector<uint8_t>> decode(std::string_view text, std::string* error) {
  std::optional<std::string_view> body = strip_padding(text, error);
  if (!body) return std::nullopt;
  std::vector<uint8_t> out;
  out.reserve(decoded_size(*body));
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < body->size(); ++i) {
    int8_t v = kValues[uint8_t((*body)[i])];
    if (v < 0) {
      if (error)
        *error = fmt::format("invalid character 0x{:02x} at offset {}", uint8_t((*body)[i]), i);
      return std::nullopt;
    }
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
      acc &= (1u << bits) - 1;
    }
  }
  if (body->size() % 4 == 1) {
    if (error)
      *error = fmt::format("truncated: {} characters is not a whole number of bytes", body->size());
    return std::nullopt;
  }
  return out;
}

}  // namespace tandem::base64
