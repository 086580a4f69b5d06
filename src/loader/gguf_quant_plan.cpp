#include "loader/gguf_quant_plan.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

namespace tandem {
namespace {

struct FileTypeName {
  GgufFileType type;
  std::string_view name;
  DType base;  // the type of the tensors no rule singles out
};

constexpr std::array<FileTypeName, 7> kFileTypes = {{
    {GgufFileType::F32, "F32", DType::F32},
    {GgufFileType::F16, "F16", DType::F16},
    {GgufFileType::Q4_0, "Q4_0", DType::Q4_0},
    {GgufFileType::Q8_0, "Q8_0", DType::Q8_0},
    {GgufFileType::Q4_K_M, "Q4_K_M", DType::Q4_K},
    {GgufFileType::Q5_K_M, "Q5_K_M", DType::Q5_K},
    {GgufFileType::Q6_K, "Q6_K", DType::Q6_K},
}};

const FileTypeName& info(GgufFileType t) {
  return *std::find_if(kFileTypes.begin(), kFileTypes.end(), [&](auto& f) { return f.type == t; });
}

// llama-quantize's tensor_allows_quantization for the tensors of dense models.
bool quantizable(std::string_view name, const Shape& shape) {
  return shape.ndim >= 2 && name.ends_with("weight") &&
         name.find("_norm.weight") == std::string_view::npos &&
         name.find("ffn_gate_inp.weight") == std::string_view::npos;
}

// The layer of "blk.N.…"; -1 for the other tensors.
int layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  return std::atoi(std::string(name.substr(4)).c_str());
}

// llama-quant.cpp's use_more_bits: the first and last eighth of the layers and every third.
bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

bool is_70b(const GgufPlanModel& m) {
  return m.num_layers == 80 &&
         ((m.arch == "llama" && m.num_heads != m.num_kv_heads) || m.arch == "qwen2");
}

// tensor_type_fallback: a type whose blocks do not divide the rows gives way to one whose do.
DType fallback(DType t, int64_t cols) {
  if (cols % dtype_block(t).elems == 0) return t;
  DType r = t;
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
      r = DType::Q4_0;
      break;
    case DType::Q4_K:
      r = DType::Q5_0;
      break;
    case DType::Q5_K:
      r = DType::Q5_1;
      break;
    case DType::Q6_K:
      r = DType::Q8_0;
      break;
    default:
      break;
  }
  return cols % dtype_block(r).elems == 0 ? r : DType::F16;
}

// llama_tensor_get_type_impl for the file types of kFileTypes.
DType chosen(GgufFileType file, const GgufPlanModel& m, std::string_view name, int64_t cols) {
  const DType base = info(file).base;
  const bool k_mix = file == GgufFileType::Q4_K_M || file == GgufFileType::Q5_K_M;
  if (name == "output.weight" || (m.tied && name == "token_embd.weight")) {
    if (cols % dtype_block(base).elems != 0) return DType::Q8_0;
    return base == DType::Q8_0 ? DType::Q8_0 : DType::Q6_K;
  }
  const int layer = layer_of(name);
  if (name.ends_with("attn_v.weight")) {
    DType t = k_mix && use_more_bits(layer, m.num_layers) ? DType::Q6_K : base;
    return is_70b(m) && t == DType::Q4_K ? DType::Q5_K : t;
  }
  // (llama-quantize counts the stacked experts' down as ffn_down too.)
  if ((name.ends_with("ffn_down.weight") || name.ends_with("ffn_down_exps.weight")) && k_mix &&
      use_more_bits(layer, m.num_layers))
    return DType::Q6_K;
  return base;
}

}  // namespace

std::optional<GgufFileType> gguf_file_type_from_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (const FileTypeName& f : kFileTypes)
    if (f.name == upper) return f.type;
  return std::nullopt;
}

std::string_view gguf_file_type_name(GgufFileType t) {
  return info(t).name;
}

DType gguf_tensor_type(GgufFileType file, const GgufPlanModel& model, std::string_view name,
                       const Shape& shape) {
  if (!quantizable(name, shape)) return DType::F32;
  const DType base = info(file).base;
  if (!dtype_is_block(base)) return base;
  const int64_t cols = shape.dims[size_t(shape.ndim - 1)];
  return fallback(chosen(file, model, name, cols), cols);
}

}  // namespace tandem
