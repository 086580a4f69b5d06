#include "loader/gguf_types.h"

#include <fmt/format.h>

namespace tandem {

std::string gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return fmt::format("type {}", uint32_t(t));
}

size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::String: case GgufType::Array: return 0;
  }
  return 0;
}

size_t gguf_min_value_bytes(GgufType t) {
  if (t == GgufType::String) return 8;       // u64 length
  if (t == GgufType::Array) return 4 + 8;    // element type + u64 count
  return gguf_type_size(t);
}

std::optional<DType> dtype_from_ggml_type(uint32_t id) {
  switch (GgmlType(id)) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    case GgmlType::Q4_0: return DType::Q4_0;
    case GgmlType::Q4_1: return DType::Q4_1;
    case GgmlType::Q5_0: return DType::Q5_0;
    case GgmlType::Q5_1: return DType::Q5_1;
    case GgmlType::Q8_0: return DType::Q8_0;
    case GgmlType::Q2_K: return DType::Q2_K;
    case GgmlType::Q3_K: return DType::Q3_K;
    case GgmlType::Q4_K: return DType::Q4_K;
    case GgmlType::Q5_K: return DType::Q5_K;
    case GgmlType::Q6_K: return DType::Q6_K;
    case GgmlType::IQ4_NL: return DType::IQ4_NL;
    case GgmlType::IQ4_XS: return DType::IQ4_XS;
  }
  return std::nullopt;
}

std::optional<uint32_t> ggml_type_of(DType t) {
  for (uint32_t id = 0; id < 64; id++)
    if (dtype_from_ggml_type(id) == t) return id;
  return std::nullopt;
}

std::string ggml_type_name(uint32_t id) {
  // ggml.h's enum ggml_type; empty slots were removed from ggml (or never existed).
  static const char* const kNames[] = {
      "f32",     "f16",    "q4_0",    "q4_1",  "",       "",       "q5_0",    "q5_1",
      "q8_0",    "q8_1",   "q2_K",    "q3_K",  "q4_K",   "q5_K",   "q6_K",    "q8_K",
      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",  "iq2_s",   "iq4_xs",
      "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m",  "bf16",    "",
      "",        "",       "tq1_0",   "tq2_0", "",       "",       "",        "mxfp4",
      "nvfp4",   "q1_0",   "q2_0"};
  if (id < std::size(kNames) && kNames[id][0] != '\0') return kNames[id];
  return fmt::format("unknown ggml type {}", id);
}

std::string_view supported_ggml_types() {
  return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, "
         "iq4_xs";
}

}  // namespace tandem
