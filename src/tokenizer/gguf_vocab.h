// The tokenizer.ggml.* metadata of a GGUF file, read and checked once (internal to
// src/tokenizer; gguf_tokenizer.h builds the Tokenizer from it). Strings view the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/gguf_value.h"

namespace tandem::tok {

// The split regexes of the tokenizer.json files llama.cpp's pre-tokenizer names "llama-bpe"
// and "qwen2" stand for.
constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class GgufTokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

struct GgufVocab {
  std::string origin;  // the file, for messages
  std::string model;   // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;     // tokenizer.ggml.pre; "default" when absent
  std::string name;    // general.name, lower case
  std::vector<std::string> tokens;  // [n]; empty ones become "[EMPTY_i]", as in llama.cpp
  std::vector<float> scores;        // [n] (SentencePiece); empty: none
  std::vector<GgufTokenType> types; // [n]; Normal when the file has none
  std::vector<std::string_view> merges;  // "a b" (BPE)
  std::optional<int32_t> bos, eos, unk, pad;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
};

// Every array length is checked against the token count, every id against the vocabulary,
// and duplicate tokens are refused (as llama.cpp does), each naming the key.
GgufVocab read_gguf_vocab(const GgufMetadata& metadata);

}  // namespace tandem::tok
