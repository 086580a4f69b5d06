// libFuzzer target: the GGUF reader on arbitrary bytes, and what is built from a file it
// accepts. Invariants: opening either succeeds or throws tandem::Error (never a crash, an
// out-of-bounds read or an allocation sized by a lying count — ASan and -rss_limit_mb
// catch those); every value of an accepted file reads back within its bytes (nested arrays
// walked to the bottom); every tensor view lies inside the input; and the model translation
// and the tokenizer built from its metadata fail only with tandem::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_tokenizer.h"

namespace {

void walk(const tandem::GgufValue& v, int depth) {
  using tandem::GgufType;
  if (v.type() != GgufType::Array) return;
  if (depth > tandem::kMaxGgufArrayDepth) tandem::fuzz::fail("walk", "arrays nest past the limit");
  if (v.element_type() == GgufType::String) {
    if (v.as_strings("s").size() != v.count()) tandem::fuzz::fail("as_strings", "count");
  } else if (v.element_type() == GgufType::Array) {
    for (const tandem::GgufValue& e : v.elements("a")) walk(e, depth + 1);
  } else if (v.is_integer() || v.element_type() == GgufType::Bool) {
    v.elements("e");
  } else {
    v.as_floats("f");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<const tandem::GgufFile> f;
  try {
    f = tandem::GgufFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
  } catch (const tandem::Error&) {
    return 0;
  }
  // An accepted file's values all read back: a throw here is a reader bug.
  for (const auto& e : f->metadata().entries()) {
    try {
      walk(e.value, 0);
    } catch (const tandem::Error& err) {
      tandem::fuzz::fail("reading an accepted value", err.what());
    }
  }
  for (const tandem::GgufTensorInfo& t : f->tensors()) {
    if (f->data_offset() + t.offset + t.nbytes > size)
      tandem::fuzz::fail("tensor bounds", std::string(t.name));
    tandem::Tensor view = f->tensor(t);
    if (view.nbytes() != t.nbytes) tandem::fuzz::fail("tensor size", std::string(t.name));
    if (t.nbytes > 0) {
      volatile std::byte last = static_cast<const std::byte*>(view.data)[t.nbytes - 1];
      (void)last;
    }
  }
  try {
    auto tok = tandem::tokenizer_from_gguf(f->metadata());
    tok->decode(tok->encode("Hello, world! 123 é", true), false);
  } catch (const tandem::Error&) {
  }
  return 0;
}
