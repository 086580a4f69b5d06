// The two type vocabularies of a GGUF file: the metadata value types (GgufType) and ggml's
// tensor types (a u32 per tensor). tandem reads a tensor of type t as DType
// dtype_from_ggml_type(t), its blocks as ggml lays them out (core/dtype.h); every other
// ggml type is refused by name when the file is opened.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace tandem {

// Metadata value types, as the file spells them (u32).
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8,
  Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
constexpr uint32_t kNumGgufTypes = 13;

// "u32", "string", "array", ...; "type N" for a number outside the enum.
std::string gguf_type_name(GgufType t);
// Bytes of one value of a fixed-size type; 0 for String and Array.
size_t gguf_type_size(GgufType t);
// The fewest bytes one value of `t` takes in a file (a string: its u64 length; an array:
// its element type and u64 count). What bounds a declared count before anything is read.
size_t gguf_min_value_bytes(GgufType t);

// ggml type ids of the types tandem reads (ggml.h's enum ggml_type).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30,
};

// The DType of a ggml type id tandem reads; nullopt for any other id.
std::optional<DType> dtype_from_ggml_type(uint32_t id);
// The ggml id of a DType that GGUF can hold (F32, F16, BF16 and the block types).
std::optional<uint32_t> ggml_type_of(DType t);
// ggml's name of a type id ("q4_K", "iq2_xxs", "bf16"), also for the ones tandem does
// not read; "unknown ggml type N" for ids ggml never defined or has removed.
std::string ggml_type_name(uint32_t id);
// The names of the types tandem reads, for error messages ("f32, f16, bf16, q8_0, ...").
std::string_view supported_ggml_types();

}  // namespace tandem
