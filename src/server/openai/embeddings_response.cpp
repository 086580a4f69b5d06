#include "server/openai/embeddings_response.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "server/common/api_error.h"
#include "server/common/json_text.h"

namespace tandem::server {
namespace {

static_assert(std::endian::native == std::endian::little, "base64_f32 writes the host's bytes");

void append_floats(std::string& out, std::span<const float> values) {
  char buf[32];
  out += '[';
  for (size_t i = 0; i < values.size(); i++) {
    if (i) out += ',';
    // Shortest text that reads back as the same float; finite (client_embedding checked).
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), values[i]);
    out.append(buf, end);
  }
  out += ']';
}

}  // namespace

std::vector<float> client_embedding(std::vector<float> pooled, std::optional<int> dimensions,
                                    bool normalize) {
  if (dimensions && size_t(*dimensions) < pooled.size()) pooled.resize(size_t(*dimensions));
  double sum = 0;
  for (float v : pooled) {
    if (!std::isfinite(v)) throw internal_error("The model produced a non-finite embedding value.");
    sum += double(v) * v;
  }
  if (!normalize || sum == 0) return pooled;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& v : pooled) v = float(double(v) * inv);
  return pooled;
}

std::string base64_f32(std::span<const float> values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; k++) chunk = (chunk << 8) | (k < n ? uint8_t(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; k++) out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

std::string embeddings_body(const EmbeddingsMeta& meta,
                            const std::vector<std::vector<float>>& vectors) {
  std::string out = "{\"id\":" + dump_json(meta.id) +
                    ",\"object\":\"list\",\"created\":" + std::to_string(meta.created) +
                    ",\"model\":" + dump_json(meta.model) + ",\"data\":[";
  for (size_t i = 0; i < vectors.size(); i++) {
    if (i) out += ',';
    out += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
    if (meta.base64)
      out += '"' + base64_f32(vectors[i]) + '"';
    else
      append_floats(out, vectors[i]);
    out += '}';
  }
  out += "],\"usage\":{\"prompt_tokens\":" + std::to_string(meta.prompt_tokens) +
         ",\"total_tokens\":" + std::to_string(meta.prompt_tokens) + "}}";
  return out;
}

}  // namespace tandem::server
