#include "loader/quant_scheme.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tandem {

using json = nlohmann::json;

namespace {

// The string at j[key], or `fallback` when absent; an error naming `field` otherwise.
std::string string_field(const json& j, const char* key, const std::string& field,
                         const std::string& src, const std::string& fallback = "") {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) fail("{}: {}.{} must be a string", src, field, key);
  return j[key].get<std::string>();
}

void require_fp8_spec(const json& spec, const std::string& field, const std::string& src) {
  if (!spec.is_object()) fail("{}: {} must be an object", src, field);
  if (string_field(spec, "type", field, src, "float") != "float")
    fail("{}: {}.type '{}' is not supported (tandem reads FP8: \"float\", 8 bits)", src, field,
         spec["type"].dump());
  if (spec.value("num_bits", 8) != 8)
    fail("{}: {}.num_bits {} is not supported (tandem reads FP8: 8 bits)", src, field,
         spec["num_bits"].dump());
  if (!spec.value("symmetric", true))
    fail("{}: {}.symmetric false is not supported (FP8 scales are symmetric)", src, field);
}

// compressed-tensors: one quantization spec for every targeted Linear.
QuantScheme parse_compressed_tensors(const json& q, const std::string& src) {
  const std::string f = "quantization_config";
  const std::string format = string_field(q, "format", f, src, "float-quantized");
  if (format != "float-quantized" && format != "naive-quantized")
    fail("{}: {}.format '{}' is not supported (tandem reads \"float-quantized\" FP8)", src, f,
         format);
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    fail("{}: {}.config_groups is missing or empty", src, f);
  const json* group = nullptr;
  for (auto it = q["config_groups"].begin(); it != q["config_groups"].end(); ++it) {
    const json& g = it.value();
    if (!g.is_object()) fail("{}: {}.config_groups.{} must be an object", src, f, it.key());
    json spec = {{"weights", g.value("weights", json())},
                 {"input_activations", g.value("input_activations", json())}};
    if (group && spec != json{{"weights", group->value("weights", json())},
                              {"input_activations", group->value("input_activations", json())}})
      fail("{}: {}.config_groups: groups with different schemes are not supported", src, f);
    group = &g;
  }
  const std::string gf = f + ".config_groups";
  QuantScheme s{.source = QuantScheme::Source::Checkpoint, .method = "compressed-tensors"};
  const json& w = group->value("weights", json());
  require_fp8_spec(w, gf + ".weights", src);
  const std::string strategy = string_field(w, "strategy", gf + ".weights", src, "tensor");
  if (strategy == "tensor") {
    s.weights = Fp8Weights::PerTensor;
  } else if (strategy == "channel") {
    s.weights = Fp8Weights::PerChannel;
  } else if (strategy == "block") {
    const json& b = w.value("block_structure", json());
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int>() < 1 || b[1].get<int>() < 1)
      fail("{}: {}.weights.block_structure must be [rows, cols]", src, gf);
    s.weights = Fp8Weights::Block;
    s.block_n = b[0].get<int>();
    s.block_k = b[1].get<int>();
  } else {
    fail("{}: {}.weights.strategy '{}' is not supported (tensor, channel or block)", src, gf,
         strategy);
  }
  if (w.value("dynamic", false)) fail("{}: {}.weights.dynamic true is not supported", src, gf);
  const json& in = group->value("input_activations", json());
  if (in.is_null())
    fail("{}: {}.input_activations is absent: weight-only FP8 (W8A16) is not supported", src, gf);
  require_fp8_spec(in, gf + ".input_activations", src);
  const std::string in_strategy =
      string_field(in, "strategy", gf + ".input_activations", src, "tensor");
  const bool dynamic = in.value("dynamic", false);
  const bool per_group = s.weights == Fp8Weights::Block;
  if (dynamic && (per_group ? in_strategy == "group" && in.value("group_size", 0) == s.block_k
                            : in_strategy == "token")) {
    s.inputs = Fp8Inputs::Dynamic;
  } else if (!dynamic && in_strategy == "tensor" && !per_group) {
    s.inputs = Fp8Inputs::Static;
  } else {
    fail(
        "{}: {}.input_activations (strategy '{}', dynamic {}) is not supported: dynamic "
        "\"token\" (\"group\" of the block width for block weights) or static \"tensor\"",
        src, gf, in_strategy, dynamic);
  }
  if (q.contains("ignore") && !q["ignore"].is_null())
    s.ignore = q["ignore"].get<std::vector<std::string>>();
  return s;
}

// "quant_method": "fp8" (vLLM's Fp8Config).
QuantScheme parse_fp8(const json& q, const std::string& src) {
  const std::string f = "quantization_config";
  QuantScheme s{.source = QuantScheme::Source::Checkpoint, .method = "fp8"};
  const std::string fmt_name = string_field(q, "fmt", f, src, "e4m3");
  if (fmt_name != "e4m3")
    fail("{}: {}.fmt '{}' is not supported (tandem reads e4m3)", src, f, fmt_name);
  const std::string act = string_field(q, "activation_scheme", f, src, "dynamic");
  if (act != "dynamic" && act != "static")
    fail("{}: {}.activation_scheme '{}' is not supported (dynamic or static)", src, f, act);
  s.inputs = act == "static" ? Fp8Inputs::Static : Fp8Inputs::Dynamic;
  s.weights = Fp8Weights::PerTensor;
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
    const json& b = q["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int>() < 1 || b[1].get<int>() < 1)
      fail("{}: {}.weight_block_size must be [rows, cols]", src, f);
    if (s.inputs == Fp8Inputs::Static)
      fail("{}: {}.activation_scheme static with weight_block_size is not supported", src, f);
    s.weights = Fp8Weights::Block;
    s.block_n = b[0].get<int>();
    s.block_k = b[1].get<int>();
  }
  for (const char* key : {"modules_to_not_convert", "ignored_layers"})
    if (q.contains(key) && !q[key].is_null())
      for (auto& m : q[key].get<std::vector<std::string>>()) s.ignore.push_back(m);
  return s;
}

}  // namespace

std::string QuantScheme::describe(const std::string& stored_dtype) const {
  if (!fp8()) return stored_dtype;
  std::string weights_name = weights == Fp8Weights::PerTensor ? "per-tensor"
                             : weights == Fp8Weights::PerChannel
                                 ? "per-channel"
                                 : fmt::format("{}x{}-block", block_n, block_k);
  std::string inputs_name = inputs == Fp8Inputs::Static ? "static inputs"
                            : weights == Fp8Weights::Block
                                ? fmt::format("dynamic per-token-per-{} inputs", block_k)
                                : "dynamic per-token inputs";
  return fmt::format("fp8_e4m3 {} weights, {} ({})", weights_name, inputs_name,
                     source == Source::Online ? "quantized at load" : method);
}

QuantScheme parse_quantization_config(const json& config, const std::string& src) {
  if (!config.is_object() || !config.contains("quantization_config") ||
      config["quantization_config"].is_null())
    return {};
  const json& q = config["quantization_config"];
  if (!q.is_object()) fail("{}: quantization_config must be an object", src);
  const std::string method = string_field(q, "quant_method", "quantization_config", src);
  if (method == "compressed-tensors") return parse_compressed_tensors(q, src);
  if (method == "fp8") return parse_fp8(q, src);
  fail(
      "{}: quantization_config.quant_method '{}' is not supported (tandem reads FP8 "
      "checkpoints: \"compressed-tensors\" or \"fp8\")",
      src, method);
}

std::optional<QuantScheme> online_quantization(const std::optional<std::string>& flag) {
  if (!flag || *flag == "none") return std::nullopt;
  if (*flag != "fp8") fail("--quantization: '{}' is not one of none, fp8", *flag);
  return QuantScheme{.source = QuantScheme::Source::Online,
                     .method = "online",
                     .weights = Fp8Weights::PerChannel,
                     .inputs = Fp8Inputs::Dynamic};
}

QuantScheme resolve_quantization(QuantScheme checkpoint, const std::optional<QuantScheme>& online) {
  if (checkpoint.fp8() || !online) return checkpoint;
  return *online;
}

std::string scale_tensor_name(const std::string& weight_name, const std::string& suffix) {
  const std::string tail = "weight";
  if (weight_name.size() < tail.size() ||
      weight_name.compare(weight_name.size() - tail.size(), tail.size(), tail) != 0)
    fail("'{}' is not a weight tensor name (it does not end in 'weight')", weight_name);
  return weight_name.substr(0, weight_name.size() - tail.size()) + suffix;
}

bool quantizable_weight_name(const std::string& name) {
  auto ends_with = [&](const std::string& tail) {
    return name.size() > tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  // Mixtral's experts are w1 (gate), w3 (up) and w2 (down); every other 2-D projection,
  // a Qwen3-MoE expert's included, ends in "_proj.weight".
  if (name.find(".experts.") != std::string::npos &&
      (ends_with(".w1.weight") || ends_with(".w2.weight") || ends_with(".w3.weight")))
    return true;
  return ends_with("_proj.weight");
}

bool stacked_experts_name(const std::string& name) {
  return name.ends_with(".experts.gate_up_proj") || name.ends_with(".experts.down_proj");
}

std::string stacked_scale_name(const std::string& name) {
  return name + "_weight_scale";
}

void check_fp8_scales(const std::string& dir, const std::string& name, const float* scales,
                      int64_t count, bool positive) {
  for (int64_t i = 0; i < count; i++) {
    const float v = scales[i];
    if (std::isfinite(v) && (positive ? v > 0.f : v >= 0.f)) continue;
    fail("{}: scale tensor '{}' holds {} at index {}: FP8 scales must be finite and {}", dir, name,
         v, i, positive ? "positive" : "non-negative");
  }
}

}  // namespace tandem
