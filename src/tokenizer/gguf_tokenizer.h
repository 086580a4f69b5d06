// The tokenizer a GGUF file carries (tokenizer.ggml.*), built as the same Tokenizer a
// tokenizer.json makes: the GGUF arrays become the components Hugging Face's tokenizer of the
// model uses, so encode/decode, special tokens and streaming behave exactly as for a folder.
//
//   tokenizer.ggml.model "gpt2" (byte-level BPE): tokens + merges; tokenizer.ggml.pre names
//     the pre-tokenizer llama.cpp applies: "llama-bpe" / "llama3" (Llama 3's split regex),
//     "qwen2" (Qwen's, after NFC), "gpt-2" (GPT-2's), "default" or none (llama.cpp's
//     fallback sequence of splits); any other is refused by name.
//   tokenizer.ggml.model "llama" (SentencePiece BPE): tokens + scores, spaces as "▁" (with
//     one prepended to each stretch of text when add_space_prefix, the default), <0xNN> byte
//     fallback; a pair of pieces merges when their concatenation is a piece, highest score
//     first and leftmost among equals — llama.cpp's and SentencePiece's order.
//   Token types (tokenizer.ggml.token_type): CONTROL and UNKNOWN tokens are special added
//   tokens, USER_DEFINED ones plain added tokens (cut out of the text first, as HF does);
//   bos/eos/unk/pad ids, add_bos_token / add_eos_token (llama.cpp's defaults when absent:
//   BOS for SentencePiece and Llama 3 vocabularies).
#pragma once

#include <memory>

#include "loader/gguf_value.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

// Throws tandem::Error naming the file and the key for an unsupported or malformed vocabulary.
std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const GgufMetadata& metadata);
// bos/eos/unk/pad tokens as text, add_bos/add_eos, tokenizer.chat_template (and the named
// tokenizer.chat_template.NAME ones), like a folder's tokenizer_config.json.
TokenizerConfig tokenizer_config_from_gguf(const GgufMetadata& metadata);

}  // namespace tandem
