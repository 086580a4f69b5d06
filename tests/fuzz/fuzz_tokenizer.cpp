// libFuzzer target: the tokenizer on arbitrary bytes, with two byte-level BPE tokenizers
// (the oracle's 512-token one and the embedded model's 6144-token one). Invariants: encode
// never fails; every id is in the vocabulary; decoding gives the text back exactly for
// valid UTF-8 (the byte-level round trip HF guarantees); the streaming decoder agrees with
// decode; and the prompt bound (server/prompt_bound.h) never exceeds the true count.
#include <fstream>
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "server/common/prompt_bound.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Loaded {
  std::shared_ptr<const tandem::Tokenizer> tok;
  tandem::server::PromptBound bound;
};

Loaded load(const std::string& dir) {
  Loaded l;
  l.tok = tandem::Tokenizer::load(dir);
  std::ifstream in(dir + "/tokenizer.json");
  l.bound = tandem::server::PromptBound::from_tokenizer(nlohmann::json::parse(in), *l.tok);
  return l;
}

const std::vector<Loaded>& tokenizers() {
  static std::vector<Loaded> all = {load(tandem::fuzz::oracle_dir("llama")),
                                    load(std::string(TANDEM_SOURCE_DIR) + "/models/tiny-kjv")};
  return all;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Loaded& l : tokenizers()) {
    std::vector<int32_t> ids = l.tok->encode(text, /*add_special_tokens=*/false);
    for (int32_t id : ids)
      if (id < 0 || id >= l.tok->vocab_size()) tandem::fuzz::fail("id out of range", std::to_string(id));
    if (int64_t(ids.size()) < l.bound.min_tokens(text.size()))
      tandem::fuzz::fail("the prompt bound exceeds the real token count", std::string(text));
    std::string back = l.tok->decode(ids, /*skip_special_tokens=*/false);
    if (valid_utf8(text) && back != text) tandem::fuzz::fail("decode(encode(x)) != x", std::string(text));
    tandem::IncrementalDecoder inc(l.tok, false);
    std::string streamed;
    for (int32_t id : ids) streamed += inc.push(id);
    streamed += inc.finish();
    if (streamed != back) tandem::fuzz::fail("the streaming decoder disagrees with decode", back);
    l.tok->encode(text, /*add_special_tokens=*/true);
  }
  return 0;
}
