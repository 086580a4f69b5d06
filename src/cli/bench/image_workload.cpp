#include "cli/bench/image_workload.h"

#include <cmath>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"
#include "media/png_encode.h"

namespace tandem::cli::bench {
namespace {

constexpr const char* kWords[] = {
    "the",  "of",    "and",   "to",   "in",   "is",    "it",    "you",   "that", "he",    "was",
    "for",  "on",    "are",   "as",   "with", "his",   "they",  "at",    "be",   "this",  "have",
    "from", "or",    "one",   "had",  "by",   "word",  "but",   "not",   "what", "all",   "were",
    "we",   "when",  "your",  "can",  "said", "there", "use",   "an",    "each", "which", "she",
    "do",   "how",   "their", "if",   "will", "up",    "other", "about", "out",  "many",  "then",
    "them", "these", "so",    "some", "her",  "would", "make",  "like",  "him"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 29);
}

}  // namespace

bool ImageWorkload::carries(int i) const {
  if (!on()) return false;
  return std::floor(double(i + 1) * fraction) > std::floor(double(i) * fraction);
}

std::pair<int, int> parse_image_size(const std::string& text) {
  int w = 0, h = 0;
  char x = 0, rest = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &rest) != 3 || (x != 'x' && x != 'X') ||
      w < 1 || h < 1 || w > 16384 || h > 16384)
    fail("--image '{}': expected WIDTHxHEIGHT, each 1..16384 (e.g. 896x896)", text);
  return {w, h};
}

RgbImage synthetic_image(int width, int height, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  const int base[3] = {byte(rng), byte(rng), byte(rng)};
  const int dx[3] = {byte(rng) % 5 - 2, byte(rng) % 5 - 2, byte(rng) % 5 - 2};
  const int dy[3] = {byte(rng) % 5 - 2, byte(rng) % 5 - 2, byte(rng) % 5 - 2};
  RgbImage image(width, height);
  for (int y = 0; y < height; ++y) {
    uint8_t* row = image.row(y);
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) row[3 * x + c] = uint8_t(base[c] + dx[c] * x / 4 + dy[c] * y / 4);
  }
  for (int b = 0; b < 6; ++b) {  // blocks of flat color, so images differ in structure too
    int bw = 1 + int(rng() % uint64_t(std::max(1, width / 3)));
    int bh = 1 + int(rng() % uint64_t(std::max(1, height / 3)));
    int x0 = int(rng() % uint64_t(width)), y0 = int(rng() % uint64_t(height));
    uint8_t color[3] = {uint8_t(byte(rng)), uint8_t(byte(rng)), uint8_t(byte(rng))};
    for (int y = y0; y < std::min(height, y0 + bh); ++y)
      for (int x = x0; x < std::min(width, x0 + bw); ++x)
        for (int c = 0; c < 3; ++c) image.row(y)[3 * x + c] = color[c];
  }
  return image;
}

std::string prompt_words(const std::vector<int32_t>& ids) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) text += ' ';
    text += kWords[size_t(uint32_t(ids[i])) % kNumWords];
  }
  return text;
}

std::string image_content_json(const ImageWorkload& w, int index, const std::string& text) {
  nlohmann::json parts = nlohmann::json::array();
  if (w.carries(index)) {
    for (int k = 0; k < w.per_request; ++k) {
      uint64_t seed =
          mix(w.seed, w.same_image ? uint64_t(k) : mix(uint64_t(index) + 1, uint64_t(k)));
      std::vector<uint8_t> png = encode_png(synthetic_image(w.width, w.height, seed));
      parts.push_back({{"type", "image_url"},
                       {"image_url", {{"url", "data:image/png;base64," + base64::encode(png)}}}});
    }
  }
  parts.push_back({{"type", "text"}, {"text", text}});
  return parts.dump();
}

}  // namespace tandem::cli::bench
