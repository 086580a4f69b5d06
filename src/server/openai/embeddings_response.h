// /v1/embeddings' answer in OpenAI's shape:
//   {"id", "object": "list", "created", "model",
//    "data": [{"object": "embedding", "index": i, "embedding": [floats] or "base64"}, ...],
//    "usage": {"prompt_tokens", "total_tokens"}}
// The body is written as text: a batch of long vectors would cost a JSON value per float.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::server {

// What a client gets from a pooled vector: its first `dimensions` values (Matryoshka
// truncation; none: all), then divided by their L2 norm unless `normalize` is off (a zero
// vector stays zero). A non-finite value is a 500: the model diverged, and JSON has no NaN.
std::vector<float> client_embedding(std::vector<float> pooled, std::optional<int> dimensions,
                                    bool normalize);

// The floats' little-endian IEEE bytes in standard base64 with padding (what OpenAI's
// encoding_format "base64" returns and its clients decode as float32).
std::string base64_f32(std::span<const float> values);

struct EmbeddingsMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
  int64_t prompt_tokens = 0;  // all inputs together
  bool base64 = false;
};

// vectors[i] answers input i. Floats are written in their shortest round-trip decimal.
std::string embeddings_body(const EmbeddingsMeta& meta,
                            const std::vector<std::vector<float>>& vectors);

}  // namespace tandem::server
