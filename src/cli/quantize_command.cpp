// `tandem quantize`: a 16-bit model folder rewritten as the compressed-tensors FP8_DYNAMIC
// checkpoint llm-compressor writes: every projection weight (quantizable_weight_name) as
// F8_E4M3 [out, in] plus weight_scale BF16 [out, 1]; everything else copied as stored;
// config.json gains the quantization_config transformers and vLLM read, with every other
// linear (lm_head, MoE routers, side projections) listed in `ignore`. Gemma 4's stacked
// 3-D experts (stacked_experts_name) are quantized too, per output channel of each expert:
// F8_E4M3 [E, N, K] plus BF16 [E, N, 1] scales (stacked_scale_name), which tandem loads
// (Gemma4Model::load_moe) and other readers would not. The bytes are those online
// quantization (--quantization fp8) computes (fp8_quantize.h), so the written folder loads
// back to the same logits.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

#include "cli/commands.h"
#include "core/error.h"
#include "loader/checkpoint.h"
#include "loader/fp8_quantize.h"
#include "loader/quant_scheme.h"
#include "loader/safetensors_writer.h"

namespace tandem::cli {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

bool is_float16(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

// Adds `name` quantized per channel: weight F8_E4M3 in t's shape and its BF16 scales
// `scale_shape` under `scale_name`, from the rows of t viewed as [rows, K] (one row per
// output channel).
void add_quantized(SafetensorsWriter& w, const std::string& name, const Tensor& t,
                   const std::string& scale_name, std::vector<int64_t> scale_shape) {
  const std::vector<int64_t> shape(t.shape.dims.begin(), t.shape.dims.begin() + t.ndim());
  const int64_t K = t.dim(t.ndim() - 1);
  const Tensor rows = t.reshape({t.numel() / K, K});
  w.add(name, DType::F8E4M3, shape, [rows](void* dst, size_t bytes) {
    std::memcpy(dst, quantize_fp8_per_channel(rows).weight.data, bytes);
  });
  w.add(scale_name, DType::BF16, scale_shape, [rows](void* dst, size_t bytes) {
    std::memcpy(dst, quantize_fp8_per_channel(rows).scale.data, bytes);
  });
}

}  // namespace

nlohmann::json fp8_dynamic_quantization_config(const std::vector<std::string>& ignore) {
  const json weights = {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"},
                        {"symmetric", true}, {"dynamic", false}, {"group_size", nullptr},
                        {"block_structure", nullptr}, {"observer", "minmax"}};
  const json inputs = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"},
                       {"symmetric", true}, {"dynamic", true}, {"group_size", nullptr},
                       {"block_structure", nullptr}, {"observer", nullptr}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"quantization_status", "compressed"},
          {"global_compression_ratio", nullptr},
          {"kv_cache_scheme", nullptr},
          {"sparsity_config", json::object()},
          {"ignore", ignore},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", inputs},
              {"output_activations", nullptr}, {"format", "float-quantized"}}}}}};
}

int run_quantize(const QuantizeOptions& o) {
  if (o.gguf) return run_quantize_gguf(o);
  try {
    const fs::path src(o.model), out(o.out);
    std::ifstream cin(src / "config.json");
    if (!cin) fail("{}: no config.json", src.string());
    json config = json::parse(cin, nullptr, false);
    if (config.is_discarded()) fail("{}: invalid JSON", (src / "config.json").string());
    if (parse_quantization_config(config, (src / "config.json").string()).fp8())
      fail("{}: the checkpoint is already quantized", src.string());
    if (fs::exists(out) && fs::equivalent(src, out)) fail("--out must differ from --model");
    const Checkpoint ck = Checkpoint::open(src);
    SafetensorsWriter w;
    std::vector<std::string> ignore;
    int quantized = 0, kept = 0;
    for (const std::string& name : ck.names()) {
      // Other safetensors files beside the weights (an oracle's golden.safetensors) stay out.
      if (ck.file_of(name).path().filename().string().rfind("model", 0) != 0) continue;
      const Tensor t = ck.get(name);
      const bool linear_like = t.ndim() == 2 && name.size() > 7 &&
                               name.compare(name.size() - 7, 7, ".weight") == 0;
      if (linear_like && is_float16(t.dtype) && quantizable_weight_name(name)) {
        add_quantized(w, name, t, scale_tensor_name(name, "weight_scale"), {t.rows(), 1});
        quantized++;
        continue;
      }
      if (t.ndim() == 3 && is_float16(t.dtype) && stacked_experts_name(name)) {
        add_quantized(w, name, t, stacked_scale_name(name), {t.dim(0), t.dim(1), 1});
        quantized++;
        continue;
      }
      // A 2-D weight left 16-bit that is not an embedding is a Linear the scheme skips.
      if (linear_like && name.find("embed") == std::string::npos)
        ignore.push_back(name.substr(0, name.size() - 7));
      w.add(name, t);
      kept++;
    }
    if (quantized == 0) fail("{}: no projection weights (*_proj.weight) to quantize", src.string());
    fs::create_directories(out);
    w.write_sharded(out, uint64_t(5) << 30);
    for (const auto& entry : fs::directory_iterator(src)) {
      const std::string f = entry.path().filename().string();
      const bool weights = entry.path().extension() == ".safetensors" || f == Checkpoint::kIndexName;
      if (entry.is_regular_file() && !weights && f != "config.json")
        fs::copy_file(entry.path(), out / f, fs::copy_options::overwrite_existing);
    }
    config["quantization_config"] = fp8_dynamic_quantization_config(ignore);
    std::ofstream cout(out / "config.json");
    cout << config.dump(2) << "\n";
    if (!cout) fail("{}: write failed", (out / "config.json").string());
    fmt::print(stderr, "wrote {}: {} projections in fp8_e4m3 (per-channel), {} tensors kept\n",
               out.string(), quantized, kept);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace tandem::cli
