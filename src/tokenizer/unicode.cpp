#include "tokenizer/unicode.h"

namespace tandem::tok {

using utf8::Category;

bool is_whitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c < 0x80)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  // Circled / squared Latin letters are symbols that Unicode also calls Alphabetic.
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F189)) return true;
  const Category k = utf8::category(c);
  return utf8::is_letter(k) || utf8::is_mark(k) || k == Category::Nd || k == Category::Nl ||
         k == Category::Pc;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return utf8::is_number(utf8::category(c));
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  return utf8::is_punctuation(utf8::category(c));
}

bool is_other(char32_t c) {
  return utf8::is_other(utf8::category(c));
}

bool is_mark(char32_t c) {
  return utf8::is_mark(utf8::category(c));
}

bool is_nonspacing_mark(char32_t c) {
  return utf8::category(c) == Category::Mn;
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace tandem::tok
