// A Hugging Face folder's tokenizer written as a GGUF file's tokenizer.ggml.* metadata, the
// way llama.cpp's convert_hf_to_gguf.py writes a byte-level BPE vocabulary, so llama.cpp and
// tandem (gguf_tokenizer.h) both read it back as the folder's tokenizer:
//   model "gpt2"; pre "gpt-2", "llama-bpe" or "qwen2", from the tokenizer.json's pre-tokenizer
//   (anything else is refused, naming it); tokens by id with their types (added special
//   tokens CONTROL, other added tokens USER_DEFINED, ids the vocabulary leaves free "[PADi]"
//   UNUSED up to the model's vocab_size); merges as "a b"; bos / eos / pad ids and add_bos /
//   add_eos from tokenizer_config.json (config.json's ids where it names none); the chat
//   template(s).
// SentencePiece / WordPiece / Unigram vocabularies are refused with a message naming the type.
#pragma once

#include <filesystem>

#include <nlohmann/json_fwd.hpp>

#include "loader/gguf_writer.h"

namespace tandem {

// `dir` holds tokenizer.json (and tokenizer_config.json); `config` is its config.json, whose
// vocab_size the token list is padded to.
void add_gguf_vocab(GgufWriter& w, const std::filesystem::path& dir, const nlohmann::json& config);

}  // namespace tandem
