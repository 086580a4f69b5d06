// GPT-2's reversible map between the 256 byte values and 256 printable characters
// (`bytes_to_unicode`): printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order. Byte-level BPE vocabularies are written in these characters.
#pragma once

#include <string>
#include <string_view>

namespace tandem::tok {

// The character that stands for byte b.
char32_t byte_to_char(unsigned char b);

// The byte that character c stands for, or -1 when c is not one of the 256.
int char_to_byte(char32_t c);

// Appends the byte-level spelling of `bytes` (any bytes) to out.
void append_byte_level(std::string& out, std::string_view bytes);

// Appends the bytes a byte-level token stands for: if every character of `token` is one of
// the 256, their bytes; otherwise the token's own UTF-8 (how HF decodes added tokens such
// as "<|im_start|>" or ones spelled outside the alphabet).
void append_token_bytes(std::string& out, std::string_view token);

}  // namespace tandem::tok
